# Precompiled MLIR and LLVM headers (cmake/Precompiled.h): built once per
# set of compile flags and reused by every target compiled with those flags.
#
# Why: clang's -ftime-trace on a pass's translation unit puts ~90% of its
# compile time in parsing MLIR's headers (LowerLaneLookup.cpp: 33 s, of
# which the frontend 31 s); with the headers precompiled it takes ~10 s.
#
# Invariant: a target reuses a precompiled header built with its own flags
# (LLVM's global flags, llvm_update_compile_flags' -fno-exceptions
# -funwind-tables, and the same sanitizers and -march); clang refuses a
# mismatched one, naming the option. Extra -D definitions are fine. Targets
# with other flags (-march=native, exceptions, -ffp-contract, ASan) do not
# use one.
#
# -DTQC_PRECOMPILED_HEADERS=OFF builds without them (same code, slower).
option(TQC_PRECOMPILED_HEADERS
  "Precompile MLIR/LLVM headers for the compiler libraries, tools and tests"
  ON)

# tq_add_precompiled_headers(NAME [COMPILE_OPTION...]): target NAME builds
# cmake/Precompiled.h with LLVM's flags plus the given options.
function(tq_add_precompiled_headers name)
  if(NOT TQC_PRECOMPILED_HEADERS)
    return()
  endif()
  add_library(${name} OBJECT ${TQC_SOURCE_DIR}/cmake/Precompiled.cpp)
  llvm_update_compile_flags(${name})
  target_compile_options(${name} PRIVATE ${ARGN})
  target_precompile_headers(${name} PRIVATE
    ${TQC_SOURCE_DIR}/cmake/Precompiled.h)
endfunction()

# tq_reuse_precompiled_headers(NAME TARGET...): compile each TARGET's C++
# sources with NAME's precompiled header (no-op when the option is OFF).
function(tq_reuse_precompiled_headers name)
  if(TQC_PRECOMPILED_HEADERS)
    foreach(target ${ARGN})
      target_precompile_headers(${target} REUSE_FROM ${name})
    endforeach()
  endif()
endfunction()

# The common case: LLVM's flags and nothing else.
tq_add_precompiled_headers(tq_precompiled_headers)
function(tq_use_precompiled_headers)
  tq_reuse_precompiled_headers(tq_precompiled_headers ${ARGN})
endfunction()
