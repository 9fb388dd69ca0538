#!/bin/bash
# Session 19, call 2: main (70a26fa, .carry/t_main) beside s19-solve (main + the prepare's
# diagonal solve without per-lane predicates): CudaParity.GatedDelta* of s19-solve, bench-gdn at
# both shapes, alternating main / s19-solve, twice.
ROOT=$PWD; R=/tmp/r2; mkdir -p $R; S=$SECONDS
t() { echo "$1 at $((SECONDS-S)) s" | tee -a $R/times.txt; tar czf $OUT/r2.tgz -C /tmp r2; }
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $R/gpu.txt
cp .carry/t_main/COMMIT $R/commit_main.txt; cp .carry/COMMIT $R/commit_solve.txt
(cd .carry/t_main && mkdir -p .carry && ln -sfn $ROOT/.carry/debs .carry/debs)
(bash scripts/gpu_machine_build.sh /tmp/bt --jobs 10 --target bench-gdn --target cuda_parity_test > /tmp/bt.log 2>&1 || tail -60 /tmp/bt.log > $R/build_tree_fail.txt) &
B1=$!; sleep 10
(cd .carry/t_main && bash scripts/gpu_machine_build.sh /tmp/bm --jobs 6 --target bench-gdn > /tmp/bm.log 2>&1 || tail -60 /tmp/bm.log > $R/build_main_fail.txt) &
B2=$!
wait $B1; . /tmp/bt/env.sh; t built_tree
PT=$(find /tmp/bt -name cuda_parity_test -type f -perm -u+x | head -1)
timeout -k 5 100 $PT --gtest_filter='CudaParity.GatedDelta*' > $R/par_gdn.log 2>&1; echo "rc $?" >> $R/par_gdn.log
t parity
wait $B2; t built_main
for i in 1; do
  for tr in m s; do
    b=/tmp/bt; [ $tr = m ] && b=/tmp/bm
    $b/bin/bench-gdn $R/g24_${tr}_$i.csv --reps 5 --only scan > $R/g24_${tr}_$i.txt 2>&1
    $b/bin/bench-gdn $R/g16_${tr}_$i.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/g16_${tr}_$i.txt 2>&1
  done
  t bench$i
done
t done
grep -E "PASSED|FAILED|^rc" $R/par_gdn.log; grep "gdn fwd " $R/g24_*.txt $R/g16_*.txt | grep B8
