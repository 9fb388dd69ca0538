#!/usr/bin/python3
"""FSDP over NCCL on several GPUs (issue #6): every model kind trained by amor-run at world size 1
and at world size W (parallel.ranks_per_run = W, one GPU per rank, NCCL) with the same global
batch gives the same loss curve and gradient norms.

Usage: fsdp_gpu_parity.py BUILD_BIN_DIR [W] [OUT.json] [--kinds k1,k2] [--dtype f32|bf16]
Exits 77 (CTest: skipped) with fewer than W GPUs. The W = 1 run uses micro_batch W*b, the W-rank
run b per rank, so both see the same global batch (the design's contract). Tolerance, relative at
every step: f32 1e-4 (as the cpu's MPI tests: reduction order only, amplified by AdamW where
gradients are tiny); bf16 2e-2 (the rounding of bf16 sums in a different order).
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

KINDS = {
    "transformer": "kind: transformer",
    "mamba2": "kind: mamba2",
    "gdn": "kind: gdn",
    "amor_gdn": "kind: amor, amor: {backbone: gdn, blocks: 1, momentum: 0.9}",
    "oryx": "kind: oryx",
}

SWEEP = """name: NAME
base:
  model: {MODEL, vocab: 260, d_model: 128, n_layers: 2, d_ff: 256, head_dim: 64,
          mamba2: {head_dim: 64, d_state: 64, chunk: 64}, gdn: {head_dim: 64, chunk: 64}}
  device: cuda
  data: {source: mqar, seq_len: 128, mqar: {num_kv_pairs: 8, num_train: 512, num_valid: 64}}
  train: {steps: 20, micro_batch: MB, lr: 3.0e-3, warmup_steps: 3, log_every: 10, seed: 7, dtype: DTYPE}
  parallel: {ranks_per_run: RPR}
"""


def gpus():
    try:
        r = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        return len([l for l in r.stdout.splitlines() if l.startswith("GPU ")]) if r.returncode == 0 else 0
    except OSError:
        return 0


def curves(out_dir):
    h5 = glob.glob(os.path.join(out_dir, "*", "*", "run.h5"))
    if len(h5) != 1:
        return None
    with h5py.File(h5[0], "r") as f:
        return f["train/loss"][:], f["train/grad_norm"][:]


def main():
    pos = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("--") and "=" in a)
    amor = os.path.join(os.path.abspath(pos[0]), "amor-run")
    W = int(pos[1]) if len(pos) > 1 else 2
    out_json = pos[2] if len(pos) > 2 else None
    kinds = opts.get("kinds", ",".join(KINDS)).split(",")
    dtype = opts.get("dtype", "f32")
    tol = 1e-4 if dtype == "f32" else 2e-2
    if gpus() < W:
        print("fewer than %d GPUs here: skipped" % W)
        return 77
    mpi = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "NCCL_NVLS_ENABLE=0"]
    work = tempfile.mkdtemp(prefix="amor_fsdp_gpu_")
    report, failed = {}, []
    try:
        for kind in kinds:
            res = {}
            for world, mb in ((1, 4 * W), (W, 4)):
                y = os.path.join(work, "%s_w%d.yaml" % (kind, world))
                with open(y, "w") as f:
                    f.write(SWEEP.replace("NAME", "%s-w%d" % (kind, world)).replace("MODEL", KINDS[kind])
                            .replace("MB", str(mb)).replace("RPR", str(world)).replace("DTYPE", dtype))
                out = os.path.join(work, "out_%s_%d" % (kind, world))
                r = subprocess.run(mpi + ["-np", str(world), amor, y, "--output", out],
                                   capture_output=True, text=True, env=dict(os.environ, AMOR_PROGRESS="plain"))
                res[world] = (r, curves(out))
            (r1, c1), (rw, cw) = res[1], res[W]
            ok = r1.returncode == 0 and rw.returncode == 0 and c1 is not None and cw is not None
            entry = {"rc": [r1.returncode, rw.returncode]}
            if ok:
                loss = float(np.max(np.abs(cw[0] - c1[0]) / np.abs(c1[0])))
                norm = float(np.max(np.abs(cw[1] - c1[1]) / np.abs(c1[1])))
                entry.update({"loss_max_rel": loss, "grad_norm_max_rel": norm,
                              "loss_w1": c1[0].tolist(), "loss_w%d" % W: cw[0].tolist()})
                ok = loss <= tol and norm <= tol * 10
                print("%-12s %s  W=%d vs W=1 (%s): loss max rel %.2e, grad norm max rel %.2e  (loss %.4f -> %.4f)" % (
                    kind, "ok  " if ok else "FAIL", W, dtype, loss, norm, c1[0][0], c1[0][-1]))
            else:
                print("%-12s FAIL  rc %d/%d\n%s\n%s" % (kind, r1.returncode, rw.returncode,
                                                       r1.stderr[-1500:], rw.stderr[-2500:]))
            report[kind] = entry
            if not ok:
                failed.append(kind)
    finally:
        if out_json:
            with open(out_json + ".tmp", "w") as f:
                json.dump(report, f, indent=1)
            os.replace(out_json + ".tmp", out_json)
        shutil.rmtree(work, ignore_errors=True)
    print("%d kinds, %d failed%s" % (len(kinds), len(failed), (": " + ", ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
