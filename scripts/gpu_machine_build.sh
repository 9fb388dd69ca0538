#!/usr/bin/env bash
# Builds amor-run on the H200 machine (Ubuntu 24.04, CUDA 13), where nothing can be installed.
# It has CMake 4, ninja, fmt, GoogleTest, HDF5, yaml-cpp, Open MPI and PyTorch, but no OpenBLAS
# and only Boost's headers. Debian's packages for what is missing travel with the call in
# .carry/debs (fetched here with `apt-get download`, see README "GPU machine") and are unpacked
# into a private prefix, never into /.
#
#   scripts/gpu_machine_build.sh BUILD_DIR [setup.sh options]
# Prints the environment line to use the build (LD_LIBRARY_PATH) and writes it to BUILD_DIR/env.sh.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$(realpath -m "$1"); shift
prefix=/tmp/amor-prefix
mkdir -p "$prefix"
for deb in "$root"/.carry/debs/*.deb; do
  [ -e "$deb" ] && dpkg -x "$deb" "$prefix"
done
lib="$prefix/usr/lib/x86_64-linux-gnu"
cmake_args=()
if [ -e "$lib/openblas-pthread/libopenblas.so" ]; then
  cmake_args+=(-DAMOR_BLAS_LIBRARY="$lib/openblas-pthread/libopenblas.so"
               -DCBLAS_INCLUDE_DIR="$prefix/usr/include/x86_64-linux-gnu/openblas-pthread")
fi
if [ -d "$prefix/usr/include/boost" ]; then
  cmake_args+=(-DBoost_ROOT="$prefix/usr" -DBoost_NO_SYSTEM_PATHS=ON)
fi
export LD_LIBRARY_PATH="$lib/openblas-pthread:$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "export LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > "$build_dir.env.sh"
"$root/scripts/setup.sh" --no-install --build-dir "$build_dir" "$@" -- "${cmake_args[@]}"
mv "$build_dir.env.sh" "$build_dir/env.sh"
