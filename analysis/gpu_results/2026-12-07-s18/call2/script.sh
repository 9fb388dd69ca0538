#!/bin/bash
# Session 18, call 2: the merge candidate (s18-gdn-merge = s17-gdn-loads on main) on the GPU:
# CudaParity.GatedDelta* against the CPU reference, then bench-gdn at both shapes by default and,
# at K 128, with AMOR_GDN_FUSED=v2w8 (8-warp blocks of 255 registers, P from the prepare).
R=$OUT; S=$SECONDS
t() { echo "$1 at $((SECONDS-S)) s" | tee -a $R/times.txt; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $R/gpu.txt
cp .carry/COMMIT $R/commit.txt
bash scripts/gpu_machine_build.sh /tmp/bn --jobs 16 --target bench-gdn --target cuda_parity_test > /tmp/bn.log 2>&1 || { tail -60 /tmp/bn.log > $R/build_fail.txt; exit 1; }
. /tmp/bn/env.sh; t built
PT=$(find /tmp/bn -name cuda_parity_test -type f -perm -u+x | head -1)
timeout -k 5 90 $PT --gtest_filter='CudaParity.GatedDelta*' > $R/par_gdn.log 2>&1; echo "rc $?" >> $R/par_gdn.log
t parity
B=/tmp/bn/bin/bench-gdn
$B /tmp/g16.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/g16.txt 2>&1
AMOR_GDN_FUSED=v2w8 $B /tmp/g16w8.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/g16w8.txt 2>&1
t done
grep -E "PASSED|FAILED|^rc" $R/par_gdn.log; grep "gdn fwd " $R/g16.txt $R/g16w8.txt
