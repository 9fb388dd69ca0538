#!/bin/bash
# Session 17, call 2: main at its newest commit (span_passing through cuda_device.cuh's vector
# helpers) against the peers: SSD parity and timing; and the GDN forward, main vs s17-gdn-loads
# 71b4c7c (auto, chain, prepare), with fla, all in one call.
ROOT=$PWD; R=/tmp/r2; mkdir -p $R; S=$SECONDS
t() { echo "$1 at $((SECONDS-S)) s" | tee -a $R/times.txt; tar czf $OUT/r2.tgz -C /tmp r2; }
left() { echo $(( ${TL:-240} - (SECONDS-S) )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $R/gpu.txt
for d in t_new t_s17-gdn-loads; do (cd .carry/$d && mkdir -p .carry && ln -sfn $ROOT/.carry/debs .carry/debs); cp .carry/$d/COMMIT $R/commit_$d.txt; done
(timeout -k 5 200 python3 .carry/t_new/tests/cuda/peer_kernels.py $R/peer.csv --peers $ROOT/.carry/peers --reps 5 --seq 2048 --only ssd,gdn > $R/peer.log 2>&1; echo "peer rc $?" >> $R/peer.log) &
PP=$!
(cd .carry/t_new && bash scripts/gpu_machine_build.sh /tmp/bm --jobs 10 --target bench-gdn --target bench-ssd --target cuda_parity_test > /tmp/bm.log 2>&1 || tail -60 /tmp/bm.log > $R/build_main_fail.txt) &
B1=$!; sleep 20
(cd .carry/t_s17-gdn-loads && bash scripts/gpu_machine_build.sh /tmp/bg --jobs 6 --target bench-gdn > /tmp/bg.log 2>&1 || tail -60 /tmp/bg.log > $R/build_gdn_fail.txt) &
B2=$!
wait $B1; . /tmp/bm/env.sh; t built_main
PT=$(find /tmp/bm -name cuda_parity_test -type f -perm -u+x | head -1)
(timeout -k 5 100 $PT --gtest_filter='CudaParity.Ssd*:-CudaParity.SsdLong' > $R/par_ssd.log 2>&1; echo "rc $?" >> $R/par_ssd.log) &
PS=$!
wait $B2; t built_gdn
wait $PP $PS; t parity_and_peers
for i in 1 2; do
  [ $(left) -gt 30 ] || break
  /tmp/bm/bin/bench-ssd $R/ssd24_$i.csv --reps 5 --heads 24 > $R/ssd24_$i.txt 2>&1
  /tmp/bm/bin/bench-ssd $R/ssd64_$i.csv --reps 5 > $R/ssd64_$i.txt 2>&1
  for tr in bm bg bgc bgp; do
    b=$tr; e=""; [ $tr = bgc ] && b=bg && e="AMOR_GDN_CHAIN_P=chain"; [ $tr = bgp ] && b=bg && e="AMOR_GDN_CHAIN_P=prepare"
    env $e /tmp/$b/bin/bench-gdn $R/gdn24_${tr}_$i.csv --reps 5 --only scan > $R/gdn24_${tr}_$i.txt 2>&1
    env $e /tmp/$b/bin/bench-gdn $R/gdn16_${tr}_$i.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/gdn16_${tr}_$i.txt 2>&1
  done
  t bench$i
done
t done
