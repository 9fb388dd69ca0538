#!/usr/bin/env bash
# Runs bench-attention (our kernels) and bench_attention_sdpa.py (PyTorch's SDPA, causal, bf16) on
# the same shapes and prints one joined table: times of forward, backward and forward + backward,
# and "speed" = SDPA time / our time (>= 1: ours is as fast or faster; the goal is >= 0.9).
#
#   tests/cuda/bench_attention.sh BUILD_DIR OUT_DIR [--reps N]
#
# Writes OUT_DIR/attention_ours.csv, attention_sdpa.csv and attention_vs_sdpa.csv. The Python is
# $AMOR_PYTHON, else python3 (it needs PyTorch with CUDA: the GPU machine's).
set -euo pipefail
build=$1
out=$2
shift 2
reps=20
if [ "${1:-}" = "--reps" ]; then reps=$2; fi
python=${AMOR_PYTHON:-python3}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$out"
"$build/bin/bench-attention" "$out/attention_ours.csv" --reps "$reps"
"$python" "$root/tests/cuda/bench_attention_sdpa.py" "$out/attention_sdpa.csv" --reps "$reps"
"$python" - "$out/attention_ours.csv" "$out/attention_sdpa.csv" "$out/attention_vs_sdpa.csv" <<'PY'
import csv, sys
ours = {r['case']: r for r in csv.DictReader(open(sys.argv[1]))}
sdpa = {r['case']: r for r in csv.DictReader(open(sys.argv[2]))}
cols = ['fwd', 'bwd', 'fwdbwd']
head = ['case', 'B'] + ['%s_us_ours' % c for c in cols] + ['%s_us_sdpa' % c for c in cols] + \
       ['%s_speed' % c for c in cols]
rows = []
print('%-24s %4s | %9s %9s %9s | %9s %9s %9s | %6s %6s %6s' %
      ('case', 'B', 'fwd', 'bwd', 'f+b', 'sdpa fwd', 'sdpa bwd', 'sdpa f+b', 'fwd x', 'bwd x',
       'f+b x'))
for name, o in ours.items():
    s = sdpa.get(name[:-6] if name.endswith(' cudnn') else name)  # cudnn rows: the same case's SDPA
    ot = [float(o['%s_us' % c]) for c in cols]
    st = [float(s['%s_us' % c]) for c in cols] if s else [float('nan')] * 3
    speed = [b / a if s else float('nan') for a, b in zip(ot, st)]
    rows.append([name, o['B']] + ['%.1f' % x for x in ot + st] + ['%.3f' % x for x in speed])
    print('%-24s %4s | %9.1f %9.1f %9.1f | %9.1f %9.1f %9.1f | %6.2f %6.2f %6.2f' %
          tuple([name, o['B']] + ot + st + speed))
with open(sys.argv[3] + '.tmp', 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(head)
    w.writerows(rows)
import os
os.replace(sys.argv[3] + '.tmp', sys.argv[3])
print('wrote %s (speed = SDPA time / our time; gated rows have no SDPA counterpart)' % sys.argv[3])
PY
