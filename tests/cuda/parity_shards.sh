#!/usr/bin/env bash
# Runs the CUDA parity test in shards at once on the GPU machine (the tests are GPU-light: a call
# checks many kernels in the time of the slowest shard) and prints one summary line per shard.
#
#   tests/cuda/parity_shards.sh BUILD_DIR OUT_DIR CAP_S SHARD...
# SHARD: NAME=FILTER, or NAME=ENV=VALUE[,ENV=VALUE...]:FILTER to set kernel switches for that shard
# (e.g. 'wg=AMOR_GDN_FUSED=wg:CudaParity.GatedDeltaSmall*'). FILTER is a gtest filter. Each shard
# runs BUILD_DIR's cuda_parity_test (found wherever the build put it) under `timeout CAP_S`, its
# output in OUT_DIR/NAME.log. Summary: shard, exit status (124: cut by the cap; 77: all skipped,
# no GPU), tests passed, failed and skipped, seconds, and the failed tests' names. Exit 1 when a
# shard failed or was cut.
set -uo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
build=$1 out=$2 cap=$3
shift 3
exe=$(find "$build" -name cuda_parity_test -type f -perm -u+x 2>/dev/null | head -n 1)
if [ -z "$exe" ]; then
  echo "parity_shards.sh: no cuda_parity_test under $build (build the target cuda_parity_test)" >&2
  exit 2
fi
mkdir -p "$out"
names=()
for shard in "$@"; do
  name=${shard%%=*}
  rest=${shard#*=}
  if [ -z "$name" ] || [ "$name" = "$shard" ] || [[ ! "$name" =~ ^[A-Za-z0-9_.-]+$ ]]; then
    echo "parity_shards.sh: bad shard '$shard' (NAME=FILTER or NAME=ENV=VALUE,...:FILTER)" >&2
    exit 2
  fi
  envs=()
  filter=$rest
  if [[ "$rest" == *:* ]] && [[ "${rest%%:*}" == *=* ]]; then
    IFS=',' read -r -a envs <<< "${rest%%:*}"
    filter=${rest#*:}
  fi
  names+=("$name")
  (
    start=$SECONDS
    env "${envs[@]}" timeout "$cap" "$exe" --gtest_filter="$filter" > "$out/$name.log" 2>&1
    echo "$? $((SECONDS - start))" > "$out/$name.status"
  ) &
done
wait
bad=0
printf '%-12s %4s %6s %6s %7s %5s  %s\n' shard rc passed failed skipped s failed_tests
for name in "${names[@]}"; do
  read -r rc secs < "$out/$name.status"
  log="$out/$name.log"
  passed=$(grep -c '^\[       OK \]' "$log")
  failed=$(grep -c '^\[  FAILED  \] [A-Za-z]*\.[A-Za-z0-9_]* (' "$log")
  skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z]*\.[A-Za-z0-9_]* (' "$log")
  which=$(grep '^\[  FAILED  \] [A-Za-z]*\.[A-Za-z0-9_]* (' "$log" | awk '{print $4}' | paste -sd, -)
  printf '%-12s %4s %6s %6s %7s %5s  %s\n' "$name" "$rc" "$passed" "$failed" "$skipped" "$secs" "$which"
  # 77: the binary's "every test skipped" status (no GPU), not a failure.
  if [ "$failed" -ne 0 ] || { [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; }; then bad=1; fi
done
exit $bad
