#!/bin/bash
# Session 19, call 1: main (70a26fa, .carry/t_main) beside the working tree (the prepare's P/A
# epilogues without the zero blocks, fixed-walk tile loads, AMOR_GDN_PREP_ORDER=a-p), both built
# with -lineinfo: fla's K 128 forward alone (peer_kernels --heads 16); CudaParity.GatedDelta* of
# the working tree (default and a-p); bench-gdn at both shapes, main / tree / tree a-p, twice;
# bench-ssd --heads 24 (main's attention-pool fix); Nsight Compute's source view of the tree's
# prepare and chain at both shapes. t7: the tree with -DPREP_MINB=7 (seven prepare blocks per SM).
ROOT=$PWD; R=/tmp/r; mkdir -p $R; S=$SECONDS
t() { echo "$1 at $((SECONDS-S)) s" | tee -a $R/times.txt; tar czf $OUT/r.tgz -C /tmp r; }
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv > $R/gpu.txt
cp .carry/t_main/COMMIT $R/commit_main.txt; cp .carry/COMMIT $R/commit_tree_base.txt
(cd .carry/t_main && mkdir -p .carry && ln -sfn $ROOT/.carry/debs .carry/debs)
(timeout -k 5 240 python3 tests/cuda/peer_kernels.py $R/peer16.csv --peers .carry/peers --reps 5 --seq 2048 --only gdn --heads 16 > $R/peer16.log 2>&1; echo "peer rc $?" >> $R/peer16.log) &
PP=$!
(CUDAFLAGS=-lineinfo bash scripts/gpu_machine_build.sh /tmp/bt --jobs 10 --target bench-gdn --target cuda_parity_test > /tmp/bt.log 2>&1 || tail -60 /tmp/bt.log > $R/build_tree_fail.txt) &
B1=$!; sleep 15
(cd .carry/t_main && CUDAFLAGS=-lineinfo bash scripts/gpu_machine_build.sh /tmp/bm --jobs 6 --target bench-gdn --target bench-ssd > /tmp/bm.log 2>&1 || tail -60 /tmp/bm.log > $R/build_main_fail.txt) &
B2=$!
(mkdir -p /tmp/t7 && cp -r $(ls -A | grep -v '^.carry$') /tmp/t7/ && mkdir -p /tmp/t7/.carry && ln -sfn $ROOT/.carry/debs /tmp/t7/.carry/debs && cd /tmp/t7 && CUDAFLAGS="-lineinfo -DPREP_MINB=7" bash scripts/gpu_machine_build.sh /tmp/b7 --jobs 6 --target bench-gdn > /tmp/b7.log 2>&1 || tail -60 /tmp/b7.log > $R/build_t7_fail.txt) &
B3=$!
wait $B1; . /tmp/bt/env.sh; t built_tree
PT=$(find /tmp/bt -name cuda_parity_test -type f -perm -u+x | head -1)
timeout -k 5 100 $PT --gtest_filter='CudaParity.GatedDelta*' > $R/par_gdn.log 2>&1; echo "rc $?" >> $R/par_gdn.log
AMOR_GDN_PREP_ORDER=a-p timeout -k 5 100 $PT --gtest_filter='CudaParity.GatedDelta*' > $R/par_gdn_ap.log 2>&1; echo "rc $?" >> $R/par_gdn_ap.log
t parity
wait $B2 $B3; t built_main_t7
wait $PP; t peers
for i in 1 2; do
  for tr in m t ta t7; do
    b=/tmp/bt; e=""; [ $tr = m ] && b=/tmp/bm; [ $tr = t7 ] && b=/tmp/b7; [ $tr = ta ] && e="AMOR_GDN_PREP_ORDER=a-p"
    env $e $b/bin/bench-gdn $R/g24_${tr}_$i.csv --reps 5 --only scan > $R/g24_${tr}_$i.txt 2>&1
    env $e $b/bin/bench-gdn $R/g16_${tr}_$i.csv --reps 5 --only scan --heads 16 --dk 128 --dv 256 > $R/g16_${tr}_$i.txt 2>&1
  done
  t bench$i
done
/tmp/bm/bin/bench-ssd $R/s24.csv --reps 5 --heads 24 > $R/s24.txt 2>&1; echo "rc $?" >> $R/s24.txt
t ssd
B=/tmp/bt/bin/bench-gdn
prof() {  # name, kernel regex, bench args...
  local n=$1 k=$2; shift 2
  timeout -k 5 100 ncu --clock-control none --section SourceCounters --import-source yes -k "regex:$k" -c 1 -o /tmp/$n $B /tmp/x.csv --reps 1 --only scan "$@" > $R/ncu_$n.log 2>&1
  ncu --import /tmp/$n.ncu-rep --page source --csv --print-source cuda,sass > /tmp/${n}_src.csv 2>> $R/ncu_$n.log
  ncu --import /tmp/$n.ncu-rep --print-summary per-kernel >> $R/ncu_$n.log 2>&1
  python3 tests/cuda/ncu_source_lines.py /tmp/${n}_src.csv --top 45 > $R/${n}_lines.txt 2>&1
  gzip -c /tmp/${n}_src.csv > $R/${n}_src.csv.gz
  t $n
}
prof prep24 gdn_prepare_reg
prof chain24 gdn_fwd_fused2
prof prep16 gdn_prepare_reg --heads 16 --dk 128 --dv 256
prof chain16 gdn_fwd_fused2 --heads 16 --dk 128 --dv 256
t done
grep -E "PASSED|FAILED|^rc" $R/par_gdn*.log; grep "gdn fwd " $R/g24_*_1.txt $R/g16_*_1.txt | grep B8; tail -3 $R/peer16.log; head -12 $R/prep24_lines.txt
