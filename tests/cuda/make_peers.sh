#!/usr/bin/env bash
# Builds the peers' folder that tests/cuda/bench_vs_peers.py and peer_kernels.py import (README
# "The peers" in tests/cuda/README.md): the Triton ops of state-spaces/mamba and
# fla-org/flash-linear-attention, and einops, from three git repositories (clones or bare mirrors),
# with the packages' __init__.py files emptied so that the ops import without the packages' CUDA
# extensions and model zoos. Writes PEERS.txt (module, repository, commit) beside them. The folder
# is never committed (.carry/ is git-ignored); it travels to the GPU machine with the call.
#
#   tests/cuda/make_peers.sh MAMBA_GIT FLA_GIT EINOPS_GIT OUT_DIR [REV]
# MAMBA_GIT etc.: a repository's git directory (a clone's .git or a bare mirror); REV (default
# HEAD) is the revision taken from each.
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,12p' "$0" >&2
  exit 2
fi
mamba=$1 fla=$2 einops=$3 out=$4 rev=${5:-HEAD}
for g in "$mamba" "$fla" "$einops"; do
  git --git-dir="$g" rev-parse --verify -q "$rev^{commit}" > /dev/null ||
    { echo "make_peers.sh: $g is not a git directory with revision $rev" >&2; exit 1; }
done
tmp=$(mktemp -d "$(dirname "$(realpath -m "$out")")/.peers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
git --git-dir="$mamba" archive "$rev" mamba_ssm/ops/triton mamba_ssm/utils | tar -x -C "$tmp"
git --git-dir="$fla" archive "$rev" fla | tar -x -C "$tmp"
git --git-dir="$einops" archive "$rev" einops | tar -x -C "$tmp"
echo "# mamba_ssm's Triton ops without its CUDA extensions (tests/cuda/make_peers.sh)" > "$tmp/mamba_ssm/__init__.py"
: > "$tmp/mamba_ssm/ops/__init__.py"
# fla.utils imports fla.__version__: keep that one line.
version=$(grep -m1 '^__version__' "$tmp/fla/__init__.py" || true)
[ -n "$version" ] || { echo "make_peers.sh: no __version__ line in fla/__init__.py" >&2; exit 1; }
echo "$version" > "$tmp/fla/__init__.py"
: > "$tmp/fla/ops/__init__.py"
: > "$tmp/fla/modules/__init__.py"
{
  echo "mamba_ssm state-spaces/mamba $(git --git-dir="$mamba" rev-parse "$rev^{commit}")"
  echo "fla fla-org/flash-linear-attention $(git --git-dir="$fla" rev-parse "$rev^{commit}")"
  echo "einops arogozhnikov/einops $(git --git-dir="$einops" rev-parse "$rev^{commit}")"
} > "$tmp/PEERS.txt"
rm -rf "$out"
mv "$tmp" "$out"
trap - EXIT
echo "make_peers.sh: wrote $out ($(du -sh "$out" | cut -f1)); commits in $out/PEERS.txt"
