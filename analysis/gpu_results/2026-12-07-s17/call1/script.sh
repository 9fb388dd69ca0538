#!/bin/bash
# Session 17, first call: main vs branches
# s16-gdn-rows (GDN chain without P/e/D work, staged stores) and s16-ssd-passing (span_passing
# float4). Make the snapshots first, here:
#   for b in main s16-gdn-rows s16-ssd-passing; do rm -rf .carry/t_$b; mkdir -p .carry/t_$b;
#     git archive $b | tar -x -C .carry/t_$b; rm -rf .carry/t_$b/analysis/gpu_results;
#     git rev-parse $b > .carry/t_$b/COMMIT; done; cp .carry/s17c1.sh .carry/t_main/
# carry: .carry/t_main .carry/t_s17-gdn-loads .carry/t_s16-ssd-passing .carry/peers .carry/debs
# run:   TL=480 bash .carry/t_main/s17c1.sh
ROOT=$PWD; R=/tmp/r1; mkdir -p $R; S=$SECONDS
t() { echo "$1 at $((SECONDS-S)) s" | tee -a $R/times.txt; tar czf $OUT/r1.tgz -C /tmp r1; }
left() { echo $(( ${TL:-480} - (SECONDS-S) )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $R/gpu.txt
for d in t_main t_s17-gdn-loads t_s16-ssd-passing; do (cd .carry/$d && mkdir -p .carry && ln -sfn $ROOT/.carry/debs .carry/debs); cp .carry/$d/COMMIT $R/commit_$d.txt; done
(timeout -k 5 200 python3 .carry/t_main/tests/cuda/peer_kernels.py $R/peer.csv --peers $ROOT/.carry/peers --reps 5 --seq 2048 --only ssd,gdn > $R/peer.log 2>&1; echo "peer rc $?" >> $R/peer.log) &
PP=$!
(cd .carry/t_main && bash scripts/gpu_machine_build.sh /tmp/bm --jobs 5 --target bench-gdn --target bench-ssd > /tmp/bm.log 2>&1 || tail -60 /tmp/bm.log > $R/build_main_fail.txt) &
B1=$!
(cd .carry/t_s17-gdn-loads && bash scripts/gpu_machine_build.sh /tmp/bg --jobs 6 --target bench-gdn --target cuda_parity_test > /tmp/bg.log 2>&1 || tail -60 /tmp/bg.log > $R/build_gdn_fail.txt) &
B2=$!
(cd .carry/t_s16-ssd-passing && bash scripts/gpu_machine_build.sh /tmp/bs --jobs 5 --target bench-ssd --target cuda_parity_test > /tmp/bs.log 2>&1 || tail -60 /tmp/bs.log > $R/build_ssd_fail.txt) &
B3=$!
wait $B2; . /tmp/bg/env.sh; t built_gdn
PG=$(find /tmp/bg -name cuda_parity_test -type f -perm -u+x | head -1)
(timeout -k 5 120 $PG --gtest_filter='CudaParity.GatedDelta*' > $R/par_gdn.log 2>&1; echo "rc $?" >> $R/par_gdn.log; AMOR_GDN_CHAIN_P=chain timeout -k 5 100 $PG --gtest_filter='CudaParity.GatedDelta*Fused*:CudaParity.GatedDeltaSmallK128' > $R/par_gdn_chain.log 2>&1; echo "rc $?" >> $R/par_gdn_chain.log) &
wait $B3; t built_ssd
PS=$(find /tmp/bs -name cuda_parity_test -type f -perm -u+x | head -1)
timeout -k 5 120 $PS --gtest_filter='CudaParity.Ssd*:-CudaParity.SsdLong' > $R/par_ssd.log 2>&1; echo "rc $?" >> $R/par_ssd.log
wait; t parity_and_peers
for i in 1 2; do
  [ $(left) -gt 60 ] || break
  for tr in bm bg; do
    /tmp/$tr/bin/bench-gdn $R/gdn24_${tr}_$i.csv --reps 5 --only scan > $R/gdn24_${tr}_$i.txt 2>&1
    /tmp/$tr/bin/bench-gdn $R/gdn16_${tr}_$i.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/gdn16_${tr}_$i.txt 2>&1
  done
  AMOR_GDN_CHAIN_P=chain /tmp/bg/bin/bench-gdn $R/gdn24_bgc_$i.csv --reps 5 --only scan > $R/gdn24_bgc_$i.txt 2>&1
  AMOR_GDN_CHAIN_P=chain /tmp/bg/bin/bench-gdn $R/gdn16_bgc_$i.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/gdn16_bgc_$i.txt 2>&1
  for tr in bm bs; do
    /tmp/$tr/bin/bench-ssd $R/ssd24_${tr}_$i.csv --reps 5 --heads 24 > $R/ssd24_${tr}_$i.txt 2>&1
    /tmp/$tr/bin/bench-ssd $R/ssd64_${tr}_$i.csv --reps 5 > $R/ssd64_${tr}_$i.txt 2>&1
  done
done
t bench
[ $(left) -gt 50 ] && for tr in bm bs; do /tmp/$tr/bin/bench-ssd $R/ssdk24_$tr.csv --kernels --reps 5 --heads 24 > $R/ssdk24_$tr.txt 2>&1; done
[ $(left) -gt 40 ] && python3 .carry/t_main/tests/cuda/kernel_profile.py $R/prof_gdn_main.txt --filter 'gdn_' --count 6 -- /tmp/bm/bin/bench-gdn /tmp/x.csv --reps 1 --only scan > /dev/null 2>&1
[ $(left) -gt 30 ] && python3 .carry/t_main/tests/cuda/kernel_profile.py $R/prof_gdn_rows.txt --filter 'gdn_' --count 6 -- /tmp/bg/bin/bench-gdn /tmp/x.csv --reps 1 --only scan > /dev/null 2>&1
t done
