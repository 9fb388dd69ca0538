#!/usr/bin/env python3
"""Whole-model training throughput of plain PyTorch models over the peers' kernels, with the
architecture and parameter count of our presets (models/presets, models/README.md): the peer that
bench_train.py's amor-run numbers are compared with (tests/cuda/bench_vs_peers.py runs both).

usage: peer_models.py OUT.csv --peers DIR [--presets transformer-180m,mamba2-180m,...]
                      [--modes eager,compile] [--seq-len 2048] [--micro-batch 4] [--steps 6]
                      [--warmup 3] [--timeout 420] [--no-force-fla-bwd] [--amor-kappa 0.772]
       peer_models.py --describe [--presets ...]     (dimensions and parameter counts; no torch)

Presets: <kind>-<size>, kind transformer | mamba2 | gdn | amor-mamba2 | amor-gdn (amor = amor-gdn,
as amor-run's default backbone), size 180m | 1.5b. Dimensions as our presets: vocab 128256 with
the embedding tied to the LM head; 180m d 768, 12 layers; 1.5b d 2048, 24 layers; every layer
pre-norm (RMSNorm, eps 1e-5) mixer + residual, then RMSNorm + SwiGLU MLP (no biases) + residual;
final RMSNorm; d_ff 1216 / 4096 for AMOR, else the multiple of 64 that brings the count nearest
the nominal size (the same fit as presets.cpp, so the counts equal amor-run's).
  transformer  q, k, v, o [d,d]; RoPE (base 1e4, half split); SDPA causal (PyTorch picks
               flash / cuDNN / efficient)
  mamba2       in_proj [2E + 2N + H, d] (z, xBC, dt), E = 2d, H = E/64, N = 128, one group;
               depthwise causal conv (k 4, bias) by torch conv1d, SiLU; SSD by mamba_ssm's
               mamba_chunk_scan_combined (chunk 64, D, dt_bias and softplus inside); gated
               RMSNorm rmsnorm(y * silu(z)) (plain PyTorch); out_proj [d, E]
  gdn          H = round(0.75 d / 64) heads, K 64, V 128: q, k, v projections, depthwise causal
               conv (k 4, no bias) by torch conv1d, SiLU; beta = sigmoid(b_proj x);
               g = -exp(A_log) softplus(a_proj x + dt_bias); fla's chunk_gated_delta_rule with
               the q/k L2 norm in the kernel; per-head RMSNorm * silu(g_proj x); o_proj
  amor-*       the backbone, norm_f, 3 AMOR blocks (classic residual: block 0 takes norm_f(h),
               blocks 1, 2 their own RMSNorm), final_norm. Each block: the normalised entropy of
               the tied LM head's softmax on its input (no gradient), gate = H > tau with
               tau = median(H) + kappa * std(H) of the micro-batch (kappa 0.772, the normal 78%
               quantile: ~22% fire, the trained rate; the same rule bench_train.py gives
               amor-run), dense causal SDPA (q, k, v, o [d,d], RoPE) times the gate, alpha =
               sigmoid(max(raw, -1)) per channel: h += alpha * gate * attn. The dense masked form
               (the authors' full_with_mask): the peer's attention costs the same at any rate.
Training: random tokens, AdamW (fused, lr 1e-4, weight decay 0.1) on f32 parameters, forward and
backward under bf16 autocast, the loss by F.cross_entropy on the full logits. "eager" runs the
module as is; "compile" wraps it in torch.compile (default mode); the peers' Triton ops are
called through torch.compiler.disable (graph breaks around them: Dynamo does not trace their
autograd Functions reliably), everything else is compiled. tokens/s is over `steps` steps after
`warmup` (compilation and Triton autotuning happen there), between two CUDA events; peak memory
is torch.cuda.max_memory_reserved over the timed steps (the caching allocator's, no CUDA context).
The modes run one after the other in one child per preset, on the same model (eager first: the
peers' Triton autotuning is then done once; the compiled model continues its training).

fla's backward refuses to run on Hopper with Triton >= 3.4 and < 3.7.1 (fla #640); the refusal is
noted and, unless --no-force-fla-bwd, fla's version flag is set so that it runs: the GDN models'
gradients are then wrong (that Triton miscompiles a kernel) and their throughput is timing only.

Each preset runs in its own child process (a crash, OOM or hang there is its rows' note; --timeout
per child; a mode that raises is its row's note and the next mode still runs). Writes OUT.csv
(temp + rename, after every preset) and the children's output to OUT.log:
preset,mode,params,d_model,n_layers,d_ff,seq_len,micro_batch,tokens_per_s,step_ms,peak_gib,
fire_rate,status,note
"""
import argparse
import json
import math
import os
import signal
import subprocess
import sys
import time

V_LLAMA3 = 128256
SIZES = {"180m": (180_000_000, 768, 12), "1.5b": (1_500_000_000, 2048, 24)}
AMOR_D_FF = {"180m": 1216, "1.5b": 4096}
KINDS = ("transformer", "mamba2", "gdn", "amor-mamba2", "amor-gdn")
SMALL_SET = "transformer-180m,mamba2-180m,gdn-180m,amor-mamba2-180m,amor-gdn-180m"
LARGE_SET = "transformer-1.5b,mamba2-1.5b,gdn-1.5b,amor-mamba2-1.5b,amor-gdn-1.5b"
AMOR_KAPPA_22 = 0.772
FIELDS = ["preset", "mode", "params", "d_model", "n_layers", "d_ff", "seq_len", "micro_batch",
          "tokens_per_s", "step_ms", "peak_gib", "fire_rate", "status", "note"]


# ---- dimensions and parameter counts (pure Python: models/presets/{presets,param_count}.cpp)

def split_preset(name):
    """'amor-mamba2-180m' -> ('amor-mamba2', '180m'); 'amor-180m' -> ('amor-gdn', '180m')."""
    kind, _, size = name.rpartition("-")
    if kind == "amor":
        kind = "amor-gdn"
    if kind not in KINDS or size not in SIZES:
        raise ValueError("unknown preset %r: <kind>-<size> with kind in %s and size in %s"
                         % (name, ", ".join(KINDS + ("amor",)), ", ".join(SIZES)))
    return kind, size


def gdn_heads(d):
    return int(math.floor(0.75 * d / 64 + 0.5))


def mixer_params(letter, d):
    if letter == "A":
        return 4 * d * d
    if letter == "M":
        di, N = 2 * d, 128
        H, conv = di // 64, di + 2 * N
        return (2 * di + 2 * N + H) * d + conv * 4 + conv + 3 * H + di + d * di
    if letter == "G":
        H = gdn_heads(d)
        qk, v = H * 64, H * 128
        return 2 * qk * d + 2 * v * d + 2 * H * d + d * v + (2 * qk + v) * 4 + 2 * H + 128
    raise ValueError(letter)


def count_params(kind, d, L, d_ff, V=V_LLAMA3, blocks=3):
    letter = {"transformer": "A", "mamba2": "M", "gdn": "G", "amor-mamba2": "M",
              "amor-gdn": "G"}[kind]
    n = V * d + d
    n += L * (d + mixer_params(letter, d) + (d + 3 * d * d_ff if d_ff > 0 else 0))
    if kind.startswith("amor"):
        n += blocks * (4 * d * d + d) + (blocks - 1) * d + d
    return n


def dims(name):
    """(kind, d, L, d_ff, params) of a preset, d_ff fitted as presets.cpp's fit_d_ff."""
    kind, size = split_preset(name)
    target, d, L = SIZES[size]
    if kind.startswith("amor"):
        d_ff = AMOR_D_FF[size]
    else:
        at1 = count_params(kind, d, L, 64)
        per = count_params(kind, d, L, 128) - at1
        steps = 1.0 + (target - at1) / per
        d_ff = 64 * max(1, int(math.floor(steps + 0.5)))  # llround of a positive value
    return kind, d, L, d_ff, count_params(kind, d, L, d_ff)


# ---- the models (torch imported only in the child)

def build_model(torch, kind, d, L, d_ff, kappa, force_fla_bwd):
    import torch.nn as nn
    import torch.nn.functional as F

    disable = getattr(torch.compiler, "disable", None) or torch._dynamo.disable
    notes = []

    def rms(x, w, eps=1e-5):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, eps)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w

    class RMSNorm(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(n))

        def forward(self, x):
            return rms(x, self.weight)

    def linear(i, o):
        m = nn.Linear(i, o, bias=False)
        nn.init.normal_(m.weight, std=0.02)
        return m

    def rope(x, base=10000.0):  # x [B,T,H,D], half split
        T, D = x.shape[1], x.shape[3]
        inv = base ** (-torch.arange(0, D // 2, device=x.device, dtype=torch.float32) * 2.0 / D)
        ang = torch.arange(T, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
        cos = torch.cat([ang.cos(), ang.cos()], -1)[None, :, None, :].to(x.dtype)
        sin = torch.cat([ang.sin(), ang.sin()], -1)[None, :, None, :].to(x.dtype)
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.q_proj, self.k_proj = linear(d, d), linear(d, d)
            self.v_proj, self.o_proj = linear(d, d), linear(d, d)

        def forward(self, x):
            B, T, _ = x.shape
            q = rope(self.q_proj(x).view(B, T, -1, 64))
            k = rope(self.k_proj(x).view(B, T, -1, 64))
            v = self.v_proj(x).view(B, T, -1, 64)
            o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                               v.transpose(1, 2), is_causal=True)
            return self.o_proj(o.transpose(1, 2).reshape(B, T, d))

    def causal_conv(x, w, b=None):  # x [B,T,C], w [C,1,K]
        T = x.shape[1]
        y = F.conv1d(x.transpose(1, 2), w, b, padding=w.shape[-1] - 1, groups=x.shape[2])
        return y[..., :T].transpose(1, 2)

    class Mamba2(nn.Module):
        def __init__(self):
            super().__init__()
            from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
            self.scan = disable(mamba_chunk_scan_combined)
            self.E, self.N = 2 * d, 128
            self.H = self.E // 64
            conv = self.E + 2 * self.N
            self.in_proj = linear(d, 2 * self.E + 2 * self.N + self.H)
            self.conv_w = nn.Parameter(torch.randn(conv, 1, 4) * 0.02)
            self.conv_b = nn.Parameter(torch.zeros(conv))
            dt = torch.exp(torch.rand(self.H) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
            self.A_log = nn.Parameter(torch.log(torch.rand(self.H) * 15 + 1))
            self.D = nn.Parameter(torch.ones(self.H))
            self.norm = nn.Parameter(torch.ones(self.E))
            self.out_proj = linear(self.E, d)

        def forward(self, x):
            B, T, _ = x.shape
            z, xBC, dt = torch.split(self.in_proj(x), [self.E, self.E + 2 * self.N, self.H], -1)
            xBC = F.silu(causal_conv(xBC, self.conv_w, self.conv_b))
            xs, Bm, Cm = torch.split(xBC, [self.E, self.N, self.N], -1)
            y = self.scan(xs.reshape(B, T, self.H, 64), dt, -torch.exp(self.A_log.float()),
                          Bm.reshape(B, T, 1, self.N), Cm.reshape(B, T, 1, self.N), chunk_size=64,
                          D=self.D, dt_bias=self.dt_bias, dt_softplus=True)
            y = rms(y.reshape(B, T, self.E) * F.silu(z), self.norm)
            return self.out_proj(y)

    class GDN(nn.Module):
        def __init__(self):
            super().__init__()
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule
            self.scan = disable(chunk_gated_delta_rule)
            self.H = gdn_heads(d)
            qk, vv = self.H * 64, self.H * 128
            self.q_proj, self.k_proj, self.v_proj = linear(d, qk), linear(d, qk), linear(d, vv)
            self.q_conv = nn.Parameter(torch.randn(qk, 1, 4) * 0.02)
            self.k_conv = nn.Parameter(torch.randn(qk, 1, 4) * 0.02)
            self.v_conv = nn.Parameter(torch.randn(vv, 1, 4) * 0.02)
            self.a_proj, self.b_proj = linear(d, self.H), linear(d, self.H)
            self.g_proj, self.o_proj = linear(d, vv), linear(vv, d)
            self.A_log = nn.Parameter(torch.log(torch.rand(self.H) * 16 + 1e-3))
            dt = torch.exp(torch.rand(self.H) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))
            self.o_norm = nn.Parameter(torch.ones(128))

        def forward(self, x):
            B, T, _ = x.shape
            q = F.silu(causal_conv(self.q_proj(x), self.q_conv)).view(B, T, self.H, 64)
            k = F.silu(causal_conv(self.k_proj(x), self.k_conv)).view(B, T, self.H, 64)
            v = F.silu(causal_conv(self.v_proj(x), self.v_conv)).view(B, T, self.H, 128)
            beta = torch.sigmoid(self.b_proj(x))
            g = -torch.exp(self.A_log.float()) * F.softplus(self.a_proj(x).float() + self.dt_bias)
            o, _ = self.scan(q, k, v, g, beta, scale=64 ** -0.5, use_qk_l2norm_in_kernel=True)
            o = rms(o, self.o_norm) * F.silu(self.g_proj(x).view(B, T, self.H, 128))
            return self.o_proj(o.reshape(B, T, self.H * 128))

    mixer_cls = {"transformer": Attention, "mamba2": Mamba2, "gdn": GDN,
                 "amor-mamba2": Mamba2, "amor-gdn": GDN}[kind]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.mixer = RMSNorm(d), mixer_cls()
            self.norm2 = RMSNorm(d)
            self.gate_proj, self.up_proj, self.down_proj = (linear(d, d_ff), linear(d, d_ff),
                                                            linear(d_ff, d))

        def forward(self, h):
            h = h + self.mixer(self.norm1(h))
            u = self.norm2(h)
            return h + self.down_proj(F.silu(self.gate_proj(u)) * self.up_proj(u))

    class AmorBlock(nn.Module):
        def __init__(self, own_norm):
            super().__init__()
            self.norm = RMSNorm(d) if own_norm else None
            self.attn = Attention()
            nn.init.zeros_(self.attn.o_proj.weight)
            self.alpha = nn.Parameter(torch.zeros(d))

        def forward(self, hn, emb):
            with torch.no_grad():  # the tied head's normalised entropy, in chunks of tokens
                flat = hn.detach().reshape(-1, d)
                ents = []
                for i in range(0, flat.shape[0], 4096):
                    logp = torch.log_softmax(F.linear(flat[i:i + 4096], emb).float(), -1)
                    ents.append(-(logp.exp() * logp).sum(-1) / math.log(emb.shape[0]))
                H = torch.cat(ents)
                tau = H.median() + kappa * H.std()
                gate = (H > tau).to(hn.dtype).view(hn.shape[0], hn.shape[1], 1)
            alpha = torch.sigmoid(torch.clamp(self.alpha, min=-1.0))
            return alpha * gate * self.attn(hn), gate.float().mean().detach()

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(V_LLAMA3, d)
            nn.init.normal_(self.embed.weight, std=0.02)
            self.layers = nn.ModuleList(Layer() for _ in range(L))
            self.norm_f = RMSNorm(d)
            self.amor = kind.startswith("amor")
            if self.amor:
                self.blocks = nn.ModuleList(AmorBlock(i > 0) for i in range(3))
                self.final_norm = RMSNorm(d)

        def forward(self, tokens, targets):
            h = self.embed(tokens)
            for layer in self.layers:
                h = layer(h)
            h = self.norm_f(h)
            fire = torch.zeros((), device=h.device)
            if self.amor:
                emb = self.embed.weight.to(h.dtype)
                for i, block in enumerate(self.blocks):
                    hn = h if i == 0 else block.norm(h)
                    delta, f = block(hn, emb)
                    h = h + delta
                    fire = fire + f / len(self.blocks)
                h = self.final_norm(h)
            logits = F.linear(h, self.embed.weight.to(h.dtype))
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))
            return loss, fire

    if kind.endswith("gdn") and force_fla_bwd:
        try:
            import triton
            from packaging import version
            if version.parse(triton.__version__) < version.parse("3.7.1"):
                import fla.ops.common.chunk_o as chunk_o
                if torch.cuda.get_device_capability()[0] == 9:
                    chunk_o.TRITON_ABOVE_3_7_1 = True
                    notes.append("fla backward forced past its Triton %s < 3.7.1 Hopper refusal "
                                 "(gradients wrong; timing only)" % triton.__version__)
        except Exception as e:  # noqa: BLE001 - a note, never a crash
            notes.append("could not force fla's backward: %s" % str(e).splitlines()[0][:150])
    return LM(), notes


def run_one(args):
    """The child: trains one preset in each mode of --modes (eager first, then the same model
    compiled: the peers' Triton autotuning is done once) and prints RESULT {json} per mode as
    soon as it has it."""
    sys.path.insert(0, os.path.abspath(args.peers))
    import traceback

    import torch
    kind, d, L, d_ff, _ = dims(args.one)
    modes = [m for m in args.modes.split(",") if m]
    torch.manual_seed(0)
    with torch.device("cuda"):  # parameters made on the GPU: no host-side init of 1.5B weights
        model, notes = build_model(torch, kind, d, L, d_ff, args.amor_kappa,
                                   not args.no_force_fla_bwd)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=True)
    B, T = args.micro_batch, args.seq_len
    gen = torch.Generator(device="cuda").manual_seed(1)
    n_data = 4
    data = torch.randint(0, V_LLAMA3, (n_data, B, T + 1), device="cuda", generator=gen)
    for mode in modes:
        row = {"mode": mode, "params": params, "d_model": d, "n_layers": L, "d_ff": d_ff,
               "seq_len": T, "micro_batch": B}
        try:
            fwd = torch.compile(model) if mode == "compile" else model

            def step(i):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    loss, fire = fwd(data[i % n_data, :, :-1], data[i % n_data, :, 1:])
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                return fire

            t0 = time.time()
            for i in range(args.warmup):
                step(i)
            torch.cuda.synchronize()
            warm_s = time.time() - t0
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            fires = []
            start.record()
            for i in range(args.steps):
                fires.append(step(i))
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end) / args.steps
            fire = float(torch.stack(fires).mean()) if kind.startswith("amor") else None
            row.update({"tokens_per_s": round(B * T / (ms / 1e3), 1), "step_ms": round(ms, 2),
                        "peak_gib": round(torch.cuda.max_memory_reserved() / 2 ** 30, 2),
                        "fire_rate": round(fire, 4) if fire is not None else "",
                        "status": "ok", "note": "; ".join(notes + ["warm-up %.0f s" % warm_s])})
        except Exception as e:  # noqa: BLE001 - this mode's row says why; the next mode runs
            traceback.print_exc()
            row.update({"status": "failed", "note": "; ".join(
                notes + [("%s: %s" % (type(e).__name__, (str(e).strip().splitlines() or
                                                         [""])[0]))[:300]])})
            torch.cuda.empty_cache()
        print("RESULT " + json.dumps(row), flush=True)
    return 0


def child_rows(preset, modes, args, log):
    """Runs the preset's child; a row per mode: its RESULT line, or one whose status says why
    there is none (crash, out of memory, timeout: whatever the child printed last)."""
    kind, d, L, d_ff, n = dims(preset)
    cmd = [sys.executable, os.path.abspath(__file__), "--one", preset, "--modes", ",".join(modes),
           "--peers", args.peers, "--seq-len", str(args.seq_len),
           "--micro-batch", str(args.micro_batch), "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--amor-kappa", str(args.amor_kappa)] + (
        ["--no-force-fla-bwd"] if args.no_force_fla_bwd else [])
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=args.timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # the child and its compile workers
        out, _ = p.communicate()
        out, rc = (out or "") + "\n(killed after %d s)" % args.timeout, "timeout"
    log.write("=== %s %s (%.0f s, rc %s)\n%s\n" % (preset, ",".join(modes), time.time() - t0, rc,
                                                  out[-8000:]))
    log.flush()
    got = {}
    for line in out.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            got[r["mode"]] = r
    rows = []
    for mode in modes:
        row = {"preset": preset, "mode": mode, "params": n, "d_model": d, "n_layers": L,
               "d_ff": d_ff, "seq_len": args.seq_len, "micro_batch": args.micro_batch,
               "tokens_per_s": "", "step_ms": "", "peak_gib": "", "fire_rate": "",
               "status": "failed", "note": ""}
        if mode in got:
            row.update(got[mode])
        else:
            row["note"] = failure_note(out, rc)
        rows.append(row)
    return rows


def failure_note(out, rc):
    """The most telling line of a failed child's output (the exception's last line)."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    if rc == "timeout":
        return "timed out" + (": last output " + lines[-2][:200] if len(lines) > 1 else "")
    errs = [l for l in lines if ("Error" in l or "error" in l) and not l.startswith("File ")]
    pick = errs[-1] if errs else (lines[-1] if lines else "no output")
    return ("rc %s: %s" % (rc, pick))[:300]


def write_csv(path, rows):
    import csv
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("out", nargs="?")
    ap.add_argument("--peers")
    ap.add_argument("--presets", default=SMALL_SET)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=420, help="seconds per preset (its child)")
    ap.add_argument("--amor-kappa", type=float, default=AMOR_KAPPA_22)
    ap.add_argument("--no-force-fla-bwd", action="store_true")
    ap.add_argument("--describe", action="store_true",
                    help="print each preset's dimensions and parameter count, then exit")
    ap.add_argument("--one", metavar="PRESET", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    presets = [p for p in args.presets.split(",") if p]
    try:
        for p in presets:
            dims(p)
    except ValueError as e:
        ap.error(str(e))
    if args.describe:
        print("%-20s %6s %4s %6s %14s" % ("preset", "d", "L", "d_ff", "params"))
        for p in presets:
            kind, d, L, d_ff, n = dims(p)
            print("%-20s %6d %4d %6d %14d" % (p, d, L, d_ff, n))
        return 0
    if not args.peers:
        ap.error("--peers DIR is required (the folder holding mamba_ssm/, fla/, einops/)")
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in ("eager", "compile"):
            ap.error("--modes: eager and/or compile, not %r" % m)
    if args.one:
        return run_one(args)
    if not args.out:
        ap.error("OUT.csv is required")
    rows = []
    log_path = os.path.splitext(args.out)[0] + ".log"
    with open(log_path, "w") as log:
        print("%-20s %-8s %8s %12s %9s %8s %6s  %s" % ("preset", "mode", "params", "tokens/s",
                                                     "step ms", "peak GiB", "fire", "status"),
              flush=True)
        for p in presets:
            for r in child_rows(p, modes, args, log):
                rows.append(r)
                print("%-20s %-8s %7.0fM %12s %9s %8s %6s  %s %s" % (
                    p, r["mode"], r["params"] / 1e6, r["tokens_per_s"] or "-",
                    r["step_ms"] or "-", r["peak_gib"] or "-",
                    r["fire_rate"] if r["fire_rate"] != "" else "-", r["status"], r["note"]),
                    flush=True)
            write_csv(args.out, rows)  # after every preset: a killed call keeps what it had
    print("wrote %s (child output: %s)" % (args.out, log_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
