#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, and runs the test suite.
#
#   scripts/test.sh [--fast] [setup.sh options...]
#     --fast   only the tests labelled "fast" (ctest -L fast); default: the full suite
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
label=full
setup_args=()
build_dir="$root/build"
while [ $# -gt 0 ]; do
  case "$1" in
    --fast) label=fast ;;
    --build-dir) build_dir=$(realpath -m "$2"); setup_args+=("$1" "$2"); shift ;;
    *) setup_args+=("$1") ;;
  esac
  shift
done

"$root/scripts/setup.sh" --build-dir "$build_dir" "${setup_args[@]}"
# Tests are small and mostly single-threaded; run two at a time on the 2-core machines.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
ctest --test-dir "$build_dir" -L "$label" --output-on-failure -j "$(nproc)"
