# What `cmake --install build --prefix P` puts under P:
#   bin/                 the tools
#   lib/                 libtq_runtime.so.1 (SONAME, public API only) and
#                        the compiler's static C++ libraries (TQQuant, the
#                        dialect, its passes, conversions, pipelines and the
#                        kernel-library writer: libMLIRTQ*.a)
#   include/tq/          the runtime's C headers, the dialect's C++ headers,
#                        TableGen files and generated .inc files
#   lib/cmake/tqc/       tqcConfig.cmake: find_package(tqc) gives
#                        tqc::tq_runtime, tqc::TQQuant, TQC_TOOLS_DIR and
#                        TQC_TD_DIR, and tqc::MLIRTQ* where MLIR 22 is found
#                        (required by COMPONENTS compiler)
#   lib/pkgconfig/       tq_runtime.pc
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)

set(TQC_TOOLS tq-aot tq-opt tq-run tq-bench tq-quant tq-gpu-check)
foreach(tool ${TQC_TOOLS})
  # Installed tools find the installed runtime next to them, and LLVM's
  # shared libraries (libMLIR, libLLVM) where the build found them.
  set_target_properties(${tool} PROPERTIES
    INSTALL_RPATH "\$ORIGIN/../${CMAKE_INSTALL_LIBDIR};${LLVM_LIBRARY_DIR}")
endforeach()
install(TARGETS ${TQC_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(TARGETS tq_runtime EXPORT tqcTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  PUBLIC_HEADER DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tq)

# The C++ libraries, for projects that build on lib/Quant, the dialect, its
# passes or the compiler driver (tqc's Python bindings call
# writeKernelLibrary). TQQuant has no dependency and joins the runtime's
# export set; the MLIR-based ones (static, linking the shared libMLIR and
# libLLVM) form tqcCompilerTargets, which tqcConfig.cmake loads after
# finding MLIR 22 (find_package(tqc COMPONENTS compiler) requires it), so a
# C project using only the runtime never needs LLVM. Every library a listed
# one links must be listed too, or the export fails.
set(TQC_COMPILER_LIBRARIES
  MLIRTQDialect
  MLIRTQTransforms
  MLIRTQApproximateMath
  MLIRTQAttachLoopAnnotations
  MLIRTQExactMath
  MLIRTQLowerLaneLookup
  MLIRTQMemRefCopyToLinalg
  MLIRTQHoistTileBuffers
  MLIRTQToLoops
  MLIRTQPipelines
  MLIRTQToGPU
  MLIRTQTarget)
# TQQuant names its headers by source path; installed, they are under
# include/. The MLIR libraries get the same, and LLVM's and MLIR's include
# directories from tqcConfig.cmake (the consumer's find_package(MLIR)).
set_property(TARGET TQQuant PROPERTY INTERFACE_INCLUDE_DIRECTORIES
  $<BUILD_INTERFACE:${TQC_SOURCE_DIR}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
foreach(lib TQQuant ${TQC_COMPILER_LIBRARIES})
  # The headers use C++20 (std::span): consumers compile as C++20.
  target_compile_features(${lib} INTERFACE cxx_std_20)
endforeach()
foreach(lib ${TQC_COMPILER_LIBRARIES})
  target_include_directories(${lib} INTERFACE
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
install(TARGETS TQQuant EXPORT tqcTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ${TQC_COMPILER_LIBRARIES} EXPORT tqcCompilerTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})

install(DIRECTORY ${TQC_SOURCE_DIR}/include/tq
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
install(DIRECTORY ${TQC_BINARY_DIR}/include/tq
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.inc" PATTERN "*.h")

set(TQC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tqc)
install(EXPORT tqcTargets NAMESPACE tqc:: DESTINATION ${TQC_CMAKE_DIR})
install(EXPORT tqcCompilerTargets NAMESPACE tqc:: DESTINATION ${TQC_CMAKE_DIR})
configure_package_config_file(${TQC_SOURCE_DIR}/cmake/tqcConfig.cmake.in
  ${TQC_BINARY_DIR}/tqcConfig.cmake
  INSTALL_DESTINATION ${TQC_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_INCLUDEDIR)
write_basic_package_version_file(${TQC_BINARY_DIR}/tqcConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${TQC_BINARY_DIR}/tqcConfig.cmake
  ${TQC_BINARY_DIR}/tqcConfigVersion.cmake DESTINATION ${TQC_CMAKE_DIR})

configure_file(${TQC_SOURCE_DIR}/cmake/tq_runtime.pc.in
  ${TQC_BINARY_DIR}/tq_runtime.pc @ONLY)
install(FILES ${TQC_BINARY_DIR}/tq_runtime.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The Python package's test builds on an installed prefix.
include(${TQC_SOURCE_DIR}/python/tests/CTest.cmake)
