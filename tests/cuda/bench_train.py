#!/usr/bin/env python3
"""Training throughput per model kind and scale on the GPU (issue #7): tokens/s, model FLOPs
utilisation against the cuBLASLt bf16 GEMM peak measured in the same run, and peak GPU memory.

Usage: bench_train.py BUILD_BIN_DIR OUT_DIR [--presets transformer-1.5b,amor-1.5b,...]
         [--seq-len 2048] [--micro-batch 4] [--steps 8] [--gpus 1 | --gpu-ids 0,1] [--profile]
         [--amor-kappa 0.772 | --amor-gate ema]
(options as --name=value or --name value)

Presets are model.preset names; AMOR also as amor-gdn-<size> and amor-mamba2-<size> (the preset
amor-<size> with model.amor.backbone gdn or mamba2; plain amor-<size> takes the config's default
backbone, gdn). Validation examples scale with the micro-batch (data.mqar.num_valid = max(4,
micro-batch): the loader refuses fewer examples than one global micro-batch).

AMOR's gate at its trained firing rate (~22%, not the 100% of an 8-step run from init). From
init, every token's normalised entropy sits within ~1e-4 of one value that depends on the width
(a near-uniform softmax over 128K tokens), and the default EMA (m_init 0.3, momentum 0.99) puts
the threshold far below it, so every token fires. No fixed threshold (m_init + fixed_offset) can
be chosen in advance at that precision. So AMOR presets run with model.amor.offset_mode adaptive,
momentum 0 and kappa 0.772: each training forward gates its own micro-batch at
tau = median(H) + 0.772 * std(H) (amor_gate.h; with momentum 0 the EMA is the batch's own
statistics), and 0.772 is the standard normal's 78% quantile, so ~22% of a roughly normal
entropy distribution fires whatever its centre and width. The table's fire column (the run's
/train/fire_rate) shows the rate measured; a rate outside 0.12-0.32 is flagged. --amor-kappa
changes kappa; --amor-gate ema keeps the config's defaults (the old 100% behaviour).

For each preset: runs bench-gemm first (its peak is the reference), then amor-run on a one-run
sweep (device cuda, bf16, synthetic MQAR data of seq_len tokens, micro_batch sequences per step,
1 rank), samples nvidia-smi's memory.used of its GPU every 200 ms for the peak, and reads
/train/tokens_per_s from run.h5 (the median over the steps after the first two, which include
warm-up: first cuBLASLt plans and allocations). With --gpus N, N presets run at once, one per GPU
(CUDA_VISIBLE_DEVICES), each GPU's memory sampled on its own.

Once the last step's progress line is printed, the run's rows are in run.h5 (amor-run flushes it
before the final checkpoint) and the run is killed: the final checkpoint, evaluation and
model.safetensors (tens of GB at 1.5B, minutes of disk time) are not what this measures.

--profile runs amor-run with AMOR_PROFILE=1 and copies each run's step profile (time by section:
mixers, MLPs, LM head, optimizer; kernels/core/profile.h) to OUT_DIR/profile_<preset>.txt. Its
synchronised section boundaries cost a little throughput; the CSV marks such rows (profiled 1).

Model FLOPs per token (documented choice, as in the PaLM/Megatron MFU convention):
  6 * (parameters)                      every weight once forward, twice backward (the tied LM
                                        head included: 6 * V * d)
  + 6 * T * d per attention layer       causal QK^T and PV (2 * 2 * T * d / 2 forward, x3 with
                                        backward); AMOR's post-hoc blocks weighted by their
                                        measured fire rate (they compute only firing rows)
The scans' own FLOPs (SSD, gated delta rule) are not counted (the usual convention for
recurrent models), which makes the recurrent models' MFU conservative.
MFU = FLOPs/token * tokens/s / peak. Writes OUT_DIR/bench_train.csv (temp + rename) and prints a
table.
"""
import csv
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import h5py
import numpy as np

SWEEP = """name: bench-train
base:
  model: MODEL
  device: cuda
  data:
    source: mqar
    seq_len: SEQ
    mqar: {num_kv_pairs: 32, num_train: NTRAIN, num_valid: NVALID}
  train: {steps: STEPS, micro_batch: MB, lr: 1.0e-4, warmup_steps: 0, log_every: 1}
  checkpoint: {every: 0, keep: 1}
"""

AMOR_KAPPA_22 = 0.772  # the standard normal's 0.78 quantile: P(H > median + 0.772 std) ~ 0.22
FIRE_RANGE = (0.12, 0.32)  # a measured AMOR fire rate outside this is flagged


def arg(name, default):
    """--name=value or --name value (the last one given wins)."""
    value = default
    argv = sys.argv[1:]
    for i, a in enumerate(argv):
        if a.startswith(name + "="):
            value = a.split("=", 1)[1]
        elif a == name and i + 1 < len(argv):
            value = argv[i + 1]
    return value


def positional():
    """The arguments that are neither options nor an option's value."""
    out, skip = [], False
    for a in sys.argv[1:]:
        if skip:
            skip = False
        elif a.startswith("--"):
            skip = "=" not in a and a not in ("--profile",)
        else:
            out.append(a)
    return out


def model_spec(preset, amor_gate, kappa):
    """The sweep's model mapping (flow YAML) for a bench preset name: the model.preset, a serial
    hybrid's pattern, an AMOR backbone alias (amor-gdn-180m, amor-mamba2-1.5b) and AMOR's gate
    settings (see the header)."""
    fields = []
    name = preset
    for backbone in ("gdn", "mamba2"):
        if preset.startswith("amor-%s-" % backbone):
            name = "amor-" + preset[len("amor-%s-" % backbone):]
            fields.append("amor.backbone: " + backbone)
    fields.insert(0, "preset: " + name)
    if preset.startswith("serial-"):
        # the AMOR table's GDN baseline, one attention layer in six (experiments/amor-table.yaml)
        fields.append("pattern: GGGGGA")
    if name.startswith("amor-") and amor_gate != "ema":
        fields += ["amor.offset_mode: adaptive", "amor.momentum: 0.0", "amor.kappa: %g" % kappa]
    return "{" + ", ".join(fields) + "}"


def sweep_text(preset, seq, mb, steps, amor_gate="batch", kappa=AMOR_KAPPA_22):
    """The one-run sweep: validation examples scale with the micro-batch (the loader refuses fewer
    examples than one global micro-batch), training examples cover every step."""
    return (SWEEP.replace("MODEL", model_spec(preset, amor_gate, kappa)).replace("SEQ", str(seq))
            .replace("NTRAIN", str(max(256, 2 * steps * mb))).replace("NVALID", str(max(4, mb)))
            .replace("MB", str(mb)).replace("STEPS", str(steps)))


def gemm_peak(bin_dir, out_dir, gpu):
    csv_path = os.path.join(out_dir, "bench_gemm_peak.csv")
    subprocess.run([os.path.join(bin_dir, "bench-gemm"), csv_path, "--only", "none-but-peak",
                    "--reps", "20"], check=True, capture_output=True, text=True,
                   env=dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu)))
    with open(csv_path) as f:
        for row in csv.DictReader(f):
            if row["op"] == "cublaslt_gemm_peak":
                return float(row["tflops"])
    raise SystemExit("bench-gemm wrote no peak row")


class MemorySampler:
    def __init__(self, gpu):
        self.gpu = gpu
        self.peak_mib, self._stop = 0, False
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop:
            r = subprocess.run(["nvidia-smi", "-i", str(self.gpu), "--query-gpu=memory.used",
                                "--format=csv,noheader,nounits"],
                               capture_output=True, text=True)
            try:
                self.peak_mib = max(self.peak_mib, int(r.stdout.split()[0]))
            except (ValueError, IndexError):
                pass
            time.sleep(0.2)

    def stop(self):
        self._stop = True
        self._t.join()
        return self.peak_mib


def attention_layers(cfg, fire_rate):
    m = cfg["model"]
    kind, L = m["kind"], m["n_layers"]
    if kind == "transformer":
        return float(L)
    if kind in ("serial",):
        pat = m["pattern"]
        return float(sum(1 for i in range(L) if pat[i % len(pat)] == "A"))
    if kind == "fused":
        return float(L)  # every fused layer holds an attention path over all tokens
    if kind == "amor":
        return m["amor"]["blocks"] * (fire_rate if np.isfinite(fire_rate) else 1.0)
    if kind == "oryx":
        return float(L) * 0.5  # training modes: about half the chunks in attention (see models/oryx)
    return 0.0


def run_until_last_step(cmd, env, steps, h5_glob, timeout_s=900):
    """Runs amor-run, streaming its output; once 'step STEPS/STEPS' is printed, waits for run.h5 to
    hold STEPS rows (it is flushed before the final checkpoint), then kills the process. Returns
    (returncode or 0 when killed after the last step, output tail, tokens_per_s rows, fire_rate rows)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    tail, last_seen, t0 = [], False, time.time()
    marker = " step %d/%d" % (steps, steps)
    for line in p.stdout:
        tail = (tail + [line])[-40:]
        if marker in line:
            last_seen = True
            break
        if time.time() - t0 > timeout_s:
            break
    tps = fire = None
    if last_seen:
        deadline = time.time() + 120
        while time.time() < deadline:
            h5s = glob.glob(h5_glob)
            try:
                with h5py.File(h5s[0], "r", swmr=True) as f:
                    if f["train/tokens_per_s"].shape[0] >= steps:
                        tps, fire = f["train/tokens_per_s"][:steps], f["train/fire_rate"][:steps]
                        break
            except (OSError, KeyError, IndexError):
                pass
            time.sleep(0.5)
    if p.poll() is None:
        p.kill()
    rest = p.stdout.read() if p.stdout else ""
    tail = (tail + rest.splitlines(keepends=True))[-40:]
    rc = p.wait()
    return (0 if tps is not None else (rc or 1)), "".join(tail), tps, fire


def bench_preset(preset, gpu, bin_dir, seq, mb, steps, peak, out_dir, profiled, amor_gate="batch",
                 kappa=AMOR_KAPPA_22):
    work = tempfile.mkdtemp(prefix="amor_bench_train_")
    sweep = os.path.join(work, "s.yaml")
    with open(sweep, "w") as f:
        f.write(sweep_text(preset, seq, mb, steps, amor_gate, kappa))
    sampler = MemorySampler(gpu)
    t0 = time.time()
    env = dict(os.environ, AMOR_PROGRESS="plain", CUDA_VISIBLE_DEVICES=str(gpu), AMOR_PROFILE="1" if profiled else "0")
    rc, out, tps, fire = run_until_last_step([os.path.join(bin_dir, "amor-run"), sweep, "--output", work], env,
                                             steps, os.path.join(work, "bench-train", "*", "run.h5"))
    wall = time.time() - t0
    peak_mib = sampler.stop()
    row = {"preset": preset, "seq_len": seq, "micro_batch": mb, "status": "ok", "wall_s": round(wall, 1),
           "peak_gpu_mib": peak_mib, "peak_tflops": round(peak, 1), "gpu": gpu, "profiled": int(profiled)}
    if rc != 0 or tps is None:
        lines = out.strip().splitlines() or ["?"]
        why = [l for l in lines if l.startswith("amor-run:")] or lines
        row["status"] = "failed: " + why[-1][:200]
        row["output"] = out[-1500:]
    else:
        run_dir = os.path.dirname(glob.glob(os.path.join(work, "bench-train", "*", "run.h5"))[0])
        if profiled and os.path.exists(os.path.join(run_dir, "profile.txt")):
            shutil.copy(os.path.join(run_dir, "profile.txt"), os.path.join(out_dir, "profile_%s.txt" % preset))
        cfg = json.load(open(os.path.join(run_dir, "config.json")))
        tok_s = float(np.median(tps[2:])) if len(tps) > 2 else float(np.median(tps))
        n_params = count_params(bin_dir, sweep)
        m = cfg["model"]
        fire_rate = float(np.nanmean(fire)) if np.isfinite(fire).any() else float("nan")
        flops_tok = 6.0 * n_params + 6.0 * seq * m["d_model"] * attention_layers(cfg, fire_rate)
        tflops = flops_tok * tok_s / 1e12
        row.update({"params": n_params, "tokens_per_s": round(tok_s, 1), "flops_per_token": flops_tok,
                    "model_tflops": round(tflops, 2), "mfu": round(tflops / peak, 4),
                    "fire_rate": fire_rate})
        if m["kind"] == "amor" and np.isfinite(fire_rate) and not (
                FIRE_RANGE[0] <= fire_rate <= FIRE_RANGE[1]):
            row["status"] = "ok (fire rate %.3f outside %.2f-%.2f)" % ((fire_rate,) + FIRE_RANGE)
    shutil.rmtree(work, ignore_errors=True)
    return row


def main():
    pos = positional()
    if "-h" in sys.argv or "--help" in sys.argv or len(pos) != 2:
        print(__doc__)
        return 0 if ("-h" in sys.argv or "--help" in sys.argv) else 2
    bin_dir, out_dir = os.path.abspath(pos[0]), os.path.abspath(pos[1])
    presets = arg("--presets", "transformer-1.5b,mamba2-1.5b,gdn-1.5b,amor-1.5b").split(",")
    seq, mb, steps = int(arg("--seq-len", 2048)), int(arg("--micro-batch", 4)), int(arg("--steps", 8))
    gpu_ids = [int(g) for g in arg("--gpu-ids", ",".join(str(i) for i in range(int(arg("--gpus", 1))))).split(",")]
    profiled = "--profile" in sys.argv
    amor_gate, kappa = arg("--amor-gate", "batch"), float(arg("--amor-kappa", AMOR_KAPPA_22))
    if amor_gate not in ("batch", "ema"):
        raise SystemExit("bench_train.py: --amor-gate is batch (the default: ~22% firing) or ema, "
                         "not %r" % amor_gate)
    os.makedirs(out_dir, exist_ok=True)
    peak = gemm_peak(bin_dir, out_dir, gpu_ids[0])
    print("reference: cuBLASLt bf16 GEMM peak %.1f TFLOP/s (bench-gemm, this run)" % peak)
    print("%-20s %10s %12s %10s %8s %10s %6s  %s" % ("preset", "params", "tokens/s", "TFLOP/s",
                                                      "MFU", "peak GiB", "fire", "status"))
    sys.stdout.flush()
    rows, lock, queue = [], threading.Lock(), list(presets)

    def worker(gpu):
        while True:
            with lock:
                if not queue:
                    return
                preset = queue.pop(0)
            row = bench_preset(preset, gpu, bin_dir, seq, mb, steps, peak, out_dir, profiled,
                               amor_gate, kappa)
            with lock:
                rows.append(row)
                fr = row.get("fire_rate", float("nan"))
                print("%-20s %10s %12s %10s %8s %10.1f %6s  %s" % (
                    preset, "%.0fM" % (row.get("params", 0) / 1e6), "%.0f" % row.get("tokens_per_s", 0),
                    "%.1f" % row.get("model_tflops", 0), "%.3f" % row.get("mfu", 0), row["peak_gpu_mib"] / 1024.0,
                    "%.3f" % fr if fr == fr else "-", row["status"]))
                if not row["status"].startswith("ok"):
                    print(row.get("output", ""))
                write_rows(out_dir, rows, presets)  # after every preset: a killed call keeps them
                sys.stdout.flush()

    threads = [threading.Thread(target=worker, args=(g,)) for g in gpu_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    path = write_rows(out_dir, rows, presets)
    print("wrote", path)
    return 0 if all(r["status"].startswith("ok") for r in rows) else 1


def write_rows(out_dir, rows, presets):
    """OUT_DIR/bench_train.csv (temp + rename) of the rows so far, in the presets' order."""
    rows = sorted(rows, key=lambda r: presets.index(r["preset"]))
    path = os.path.join(out_dir, "bench_train.csv")
    keys = sorted({k for row in rows for k in row if k != "output"})
    with open(path + ".tmp", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(path + ".tmp", path)
    return path


def count_params(bin_dir, sweep):
    """The run's exact parameter count, from amor-run --dry-run (it prints e.g. '1524.03M')."""
    r = subprocess.run([os.path.join(bin_dir, "amor-run"), sweep, "--dry-run"], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        for tok in line.split():
            if tok.endswith("M"):
                try:
                    return float(tok[:-1]) * 1e6
                except ValueError:
                    pass
    raise SystemExit("no parameter count in amor-run --dry-run output:\n" + r.stdout)


if __name__ == "__main__":
    sys.exit(main())
