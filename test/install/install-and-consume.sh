#!/usr/bin/env bash
# Installs the build tree into a fresh prefix and uses it as a user would:
# the tools run from the prefix, a CMake project finds tqc with
# find_package, a C file builds with pkg-config, and the runtime exports its
# public API only, under its SONAME; a C++ project links the installed
# dialect, pipelines and kernel-library writer (tqc::MLIRTQ*, through
# find_package(tqc COMPONENTS compiler)) and lib/Quant (tqc::TQQuant).
#   install-and-consume.sh BUILD_DIR SOURCE_DIR KERNEL_LIBRARY WORK_DIR
set -euo pipefail
build=$1 source=$2 kernels=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"

"$prefix/bin/tq-aot" --version | grep -q '^tq-aot (tqc '
"$prefix/bin/tq-quant" --version | grep -q '^tq-quant (tqc '
"$prefix/bin/tq-run" --version | grep -q '^tq-run (tqc '

lib=$prefix/lib/libtq_runtime.so
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == libtq_runtime.so.1 ]] || { echo "SONAME is '$soname'"; exit 1; }
[[ -e "$prefix/lib/libtq_runtime.so.1" ]]
# Every exported function is part of the public headers.
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {print $3}' | sed 's/@.*//' | sort)
for f in $exported; do
  grep -qw "$f" "$prefix/include/tq/tq_runtime.h" "$prefix/include/tq/tq_ggml.h" \
    || { echo "exported but not public: $f"; exit 1; }
done
! nm -D --defined-only "$lib" | grep -qw tq_thread_pool_create

cmake -S "$source/test/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log"
cmake --build "$work/consumer" > "$work/build.log"
"$work/consumer/consumer" "$kernels"

# The C++ libraries, and the C project not pulling LLVM in: its configure
# must not have looked for MLIR's package (nor found one).
[[ -e "$prefix/lib/libMLIRTQTarget.a" && -e "$prefix/lib/libTQQuant.a" ]]
[[ -e "$prefix/lib/cmake/tqc/tqcCompilerTargets.cmake" ]]
! grep -q '^MLIR_DIR:' "$work/consumer/CMakeCache.txt"
cmake -S "$source/test/install/consumer-cxx" -B "$work/consumer-cxx" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${CXX:-c++}" \
  > "$work/configure-cxx.log"
cmake --build "$work/consumer-cxx" > "$work/build-cxx.log"
"$work/consumer-cxx/consumer-cxx"
"$work/consumer-cxx/consumer-quant"
# consumer-quant links no LLVM library.
! readelf -d "$work/consumer-cxx/consumer-quant" | grep -q 'libLLVM\|libMLIR'

export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
[[ "$(pkg-config --modversion tq_runtime)" == "$(sed -n 's/^#define TQC_VERSION "\(.*\)"/\1/p' "$prefix/include/tq/Version.h")" ]]
cc -std=c11 "$source/test/install/consumer/consumer.c" -o "$work/consumer-pc" \
  $(pkg-config --cflags --libs tq_runtime) -Wl,-rpath,"$prefix/lib"
"$work/consumer-pc" "$kernels"
echo "install-and-consume: ok"
