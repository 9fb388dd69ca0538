#!/usr/bin/env bash
# Runs the CUDA parity test (tests/cuda) on the CPU, with every kernel of the memory-bound ops
# emulated (emu.h): a check of the kernels' logic on a machine without a GPU, before the real run
# on the GPU machine. Needs CUDA's headers (no GPU, no driver) and a CUDA-enabled build directory,
# whose compiled .cpp objects (with AMOR_HAVE_CUDA) and test library it links against.
#
#   tests/cuda/emu/run_parity_emulated.sh BUILD_DIR [gtest arguments, e.g. --gtest_filter=...]
#   tests/cuda/emu/run_parity_emulated.sh BUILD_DIR --bench OUT.csv [bench-ops arguments]
#
# The second form runs the bench-ops command instead (its harness, not its timings, is what the
# emulation checks). Slow (every CUDA thread is a host thread): the whole parity test takes tens of
# minutes on two cores; filter it to the ops you changed. PYTHON and CUDA_INCLUDE override the
# interpreter (default /usr/bin/python3) and CUDA's include directory.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
build=$(realpath "$1"); shift
cuda_include=${CUDA_INCLUDE:-/usr/local/cuda/include}
python=${PYTHON:-/usr/bin/python3}
work="$build/cuda_emu"
mkdir -p "$work/src" "$work/inc"
objects="$build/kernels/CMakeFiles/amor_kernels.dir"
if [ ! -d "$objects" ] || [ ! -f "$build/tests/libamor_testing.a" ]; then
  echo "build the targets amor_kernels and amor_testing in $build (with CUDA) first" >&2
  exit 1
fi

# Through ccache where there is one: a rerun recompiles only what changed.
launcher=()
if command -v ccache >/dev/null; then launcher=(ccache); fi
cxx=("${launcher[@]}" g++ -std=c++20 -O2 -DAMOR_HAVE_CUDA=1 -DGTEST_HAS_PTHREAD=1 -I"$work/inc" -I"$root"
     -isystem "$cuda_include" -I/usr/include/x86_64-linux-gnu/openblas-pthread)
emu=(-include "$root/tests/cuda/emu/emu.h")
# Kernel sources, rewritten: launches become emu::launch calls. The headers too (the rewritten
# copies in $work/inc come first on the include path): cuda_device.cuh's extern __shared__ and
# ssd_tile.cuh's launch_chunks; a header with neither comes out as it was.
for cuh in "$root"/kernels/*/*.cuh; do
  rel=${cuh#"$root"/}
  mkdir -p "$work/inc/$(dirname "$rel")"
  "$python" "$root/tests/cuda/emu/to_cpp.py" "$cuh" "$work/inc/$rel"
done
objs=()
pids=()
compile() {  # compile SRC OBJ [flags...]
  local src=$1 obj=$2
  shift 2
  "${cxx[@]}" "$@" -c "$src" -o "$obj" &
  pids+=($!)
  objs+=("$obj")
}
for cu in "$root"/kernels/core/cuda_backend.cu "$root"/kernels/*/*_cuda.cu; do
  name=$(basename "$cu" .cu)
  "$python" "$root/tests/cuda/emu/to_cpp.py" "$cu" "$work/src/$name.cpp"
  compile "$work/src/$name.cpp" "$work/src/$name.o" "${emu[@]}"
done
compile "$root/tests/cuda/emu/emu.cpp" "$work/src/emu.o"
if [ "${1:-}" = "--bench" ]; then
  shift
  compile "$root/tests/cuda/bench_ops_main.cpp" "$work/src/bench_ops_main.o" "${emu[@]}"
  exe="$work/bench_ops_emulated"
else
  for src in "$root"/tests/cuda/parity.cpp "$root"/tests/cuda/cuda_parity_test.cpp \
             "$root"/tests/cuda/parity*_test.cpp; do
    compile "$src" "$work/src/$(basename "$src" .cpp).o"
  done
  exe="$work/cuda_parity_emulated"
fi
for p in "${pids[@]}"; do wait "$p"; done
mapfile -t cpp_objs < <(find "$objects" -name '*.cpp.o')
g++ -o "$exe" "${objs[@]}" "${cpp_objs[@]}" "$build/tests/libamor_testing.a" \
  -lgtest_main -lgtest -lfmt -lopenblas -lpthread
# Hundreds of host threads per emulated block: at the lowest priority, so a shared machine stays
# usable.
nice -n 19 "$exe" "$@"
