#!/usr/bin/env python3
"""Times the peers' own kernels at our benchmark shapes: mamba_ssm's mamba_chunk_scan_combined
(Mamba2 SSD, Triton) and flash-linear-attention's chunk_gated_delta_rule (Triton), forward and
forward + backward, bf16, 16K tokens per call; and PyTorch's decode attention (group decode). Each
time is per call: the call replayed from a CUDA graph N times back to back between CUDA events (or
issued back to back where it cannot be captured), median of 5 rounds, after warm-up (the first
calls also run Triton's autotuning).
Inputs are random (never zeros), in the layouts the peers take: x [B,T,H,P], dt [B,T,H]
(already positive: no softplus, no dt_bias, as our scan takes it), A [H] < 0, B/C [B,T,G,N], D [H]; q/k [B,T,H,K] with rows of
unit norm (as the model's L2 norm gives), v [B,T,H,V], g [B,T,H] log-decay < 0, beta in (0,1).

The peers' sources are not part of this repository: fetch state-spaces/mamba and
fla-org/flash-linear-attention (and einops) into a git-ignored folder and pass it as --peers
(the folder holding mamba_ssm/, fla/, einops/). mamba_ssm's and fla's top-level __init__ import
their CUDA extensions and model zoos: the folder's copies of mamba_ssm/__init__.py,
fla/__init__.py, fla/ops/__init__.py and fla/modules/__init__.py are emptied so the ops load alone
(tests/cuda/README.md, "The peers", says how the folder is made).

Group decode (no peer sources needed, only PyTorch >= 2.3): bench-attention's decode rows, one query
row per sequence over a KV cache of Tk keys, B in {1, 8}, Tk 4K .. 128K, H = Hkv = 32, D = 64, bf16,
timed as torch.nn.functional.scaled_dot_product_attention(q [B,H,1,D], k, v [B,Hkv,Tk,D],
is_causal=False: the one query is the last position, it sees every key) under each SDPA backend
forced alone with torch.nn.attention.sdpa_kernel: FLASH_ATTENTION, EFFICIENT_ATTENTION,
CUDNN_ATTENTION, MATH (rows peer sdpa-flash, sdpa-efficient, sdpa-cudnn, sdpa-math). q, k, v are
contiguous in SDPA's own layout (a PyTorch KV cache's [B,Hkv,Tk,D]: the peer at its best, no
transposed views). Hkv < H (none of today's rows) would pass enable_gqa=True, not expanded copies.
As bench-attention does, each timed call rotates over enough q/k/v sets (up to 8) to span >= 256
MB of K and V, so the cache is not read from L2 (50 MB): one timed call runs SDPA once on each set,
and the time per SDPA call is that over the number of sets. A backend that refuses the inputs is a
row with an empty fwd_us and the note "refused: <its error's first line> (<the first reason SDPA
warned of>)". dims is "H32 Hkv32 D64"; T is Tk; fwdbwd_us is empty (decode has no backward).

usage: peer_kernels.py OUT.csv [--peers DIR] [--reps N] [--only ssd,gdn,decode] [--seq 2048,16384]
                       [--heads 16,24] [--profile OUT.txt] [--no-force-fla-bwd] [--dry-run]
--only: a comma list of groups (default all three); --peers is needed for ssd and gdn; --seq keeps
those T of ssd and gdn (decode keeps every Tk), --heads those H (e.g. --only gdn --heads 16: fla's
K 128 shape alone, which a call's time limit cut off behind the others in sessions 17 and 18). --dry-run needs no GPU: it prints the plan and
builds each decode case's inputs on the CPU at Tk <= 64 (checking shapes, layout and the number of
sets; where this torch has SDPA, its output against a plain softmax(q k^T) v, GQA included).
Writes CSV rows: op,peer,B,T,H,dims,fwd_us,fwdbwd_us,note (fwdbwd_us empty with the reason in
note when the peer's backward refuses to run). --profile: per-kernel CUDA time of one fwd+bwd
call per case at T 2K, from torch.profiler.

fla's backward refuses to run on Hopper with Triton >= 3.4 and < 3.7.1 (its chunk_bwd_dqkwg
raises: that Triton miscompiles it, fla issue #640). The refusal text goes to the row's note; then,
unless --no-force-fla-bwd, the backward is timed once more with fla's version flag
(fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1) set to True, and the note says so: that time is of
the same kernels, whose gradients are wrong on this Triton (timing only, never a result).
"""
import argparse
import math
import os
import statistics
import sys
import traceback

TOKENS = 16384
SSD_CASES = [  # (T, H, P, N)
    (2048, 64, 64, 128), (4096, 64, 64, 128), (8192, 64, 64, 128), (16384, 64, 64, 128),
    (2048, 24, 64, 128), (16384, 24, 64, 128)]
GDN_CASES = [  # (T, H, K, V)
    (2048, 24, 64, 128), (4096, 24, 64, 128), (8192, 24, 64, 128), (16384, 24, 64, 128),
    (2048, 16, 128, 256), (8192, 16, 128, 256)]
# bench-attention's decode rows (bench_attention_main.cpp, run_decode_rows): (B, Tk, H, Hkv, D)
DECODE_CASES = [(B, Tk, 32, 32, 64) for B in (1, 8)
                for Tk in (4096, 8192, 16384, 32768, 65536, 131072)]
# (peer name in the CSV, torch.nn.attention.SDPBackend member)
SDPA_BACKENDS = [('sdpa-flash', 'FLASH_ATTENTION'), ('sdpa-efficient', 'EFFICIENT_ATTENTION'),
                 ('sdpa-cudnn', 'CUDNN_ATTENTION'), ('sdpa-math', 'MATH')]
GROUPS = ('ssd', 'gdn', 'decode')


def first_line(e):
    """An exception's first non-empty line, at most 300 characters, no commas (CSV-safe)."""
    lines = [l.strip() for l in str(e).splitlines() if l.strip()] or [type(e).__name__]
    return ('%s: %s' % (type(e).__name__, lines[0]))[:300].replace(',', ';')


def _events_us(torch, fn, reps):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / reps)
    return statistics.median(times)


def time_us(torch, fn, reps):
    """Device time per call, the peer at its best: the call captured once in a CUDA graph and
    replayed `reps` times back to back between two CUDA events (no Python or Triton launch cost
    at all), median of 5 rounds; where capture fails, the calls themselves issued back to back
    (the host runs ahead, hiding launch cost while it is below the kernels' time). The smaller of
    the two is returned. The first calls warm up (and run Triton's autotuning)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    eager = _events_us(torch, fn, reps)
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        graphed = _events_us(torch, graph.replay, reps)
        del graph
    except Exception:  # not capturable (a host sync inside): the eager number stands
        torch.cuda.synchronize()
        return eager
    return min(eager, graphed)


def ssd_case(torch, T, H, P, N, gen):
    from mamba_ssm.ops.triton.ssd_combined import mamba_chunk_scan_combined
    B = TOKENS // T
    bf = torch.bfloat16
    x = torch.randn(B, T, H, P, device='cuda', dtype=bf, generator=gen)
    dt = (torch.rand(B, T, H, device='cuda', generator=gen) * 0.1 + 0.001)
    A = -(torch.rand(H, device='cuda', generator=gen) * 15 + 1)
    Bm = torch.randn(B, T, 1, N, device='cuda', dtype=bf, generator=gen)
    Cm = torch.randn(B, T, 1, N, device='cuda', dtype=bf, generator=gen)
    D = torch.randn(H, device='cuda', generator=gen)
    dy = torch.randn(B, T, H, P, device='cuda', dtype=bf, generator=gen)
    leaves = [t.requires_grad_(True) for t in (x, dt, A, Bm, Cm, D)]

    def fwd():
        with torch.no_grad():
            mamba_chunk_scan_combined(x, dt, A, Bm, Cm, chunk_size=64, D=D)

    def fwdbwd():
        for t in leaves:
            t.grad = None
        y = mamba_chunk_scan_combined(x, dt, A, Bm, Cm, chunk_size=64, D=D)
        y.backward(dy)
    return B, fwd, fwdbwd


def gdn_case(torch, T, H, K, V, gen):
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule
    B = TOKENS // T
    bf = torch.bfloat16
    q = torch.nn.functional.normalize(torch.randn(B, T, H, K, device='cuda', generator=gen), dim=-1)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, K, device='cuda', generator=gen), dim=-1)
    q, k = q.to(bf), k.to(bf)
    v = torch.randn(B, T, H, V, device='cuda', dtype=bf, generator=gen)
    g = torch.nn.functional.logsigmoid(torch.randn(B, T, H, device='cuda', generator=gen) + 4.0)
    beta = torch.rand(B, T, H, device='cuda', generator=gen).to(bf)
    do = torch.randn(B, T, H, V, device='cuda', dtype=bf, generator=gen)
    leaves = [t.requires_grad_(True) for t in (q, k, v, g, beta)]
    scale = K ** -0.5

    def fwd():
        with torch.no_grad():
            chunk_gated_delta_rule(q, k, v, g, beta, scale=scale)

    def fwdbwd():
        for t in leaves:
            t.grad = None
        o, _ = chunk_gated_delta_rule(q, k, v, g, beta, scale=scale)
        o.backward(do)
    return B, fwd, fwdbwd


def decode_kv_bytes(B, Tk, Hkv, D):
    """The K and V bytes one decode call reads (bf16): the traffic that bounds it, as
    bench-attention counts it for its GB/s."""
    return 2.0 * B * Tk * Hkv * D * 2.0


def decode_sets(B, Tk, Hkv, D):
    """How many q/k/v sets a timed call rotates over: enough to span >= 256 MB of K and V (H200's
    L2 is 50 MB), at most 8; bench-attention's run_decode uses the same rule."""
    return int(min(8, max(1, math.ceil(256e6 / decode_kv_bytes(B, Tk, Hkv, D)))))


def decode_inputs(torch, B, Tk, H, Hkv, D, sets, gen, device='cuda', dtype=None):
    """`sets` independent (q [B,H,1,D], k [B,Hkv,Tk,D], v [B,Hkv,Tk,D]) triples, contiguous, random
    N(0,1) (never zeros), bf16 unless dtype says otherwise; gen lives on `device`."""
    dt = dtype or torch.bfloat16
    q, k, v = [], [], []
    for _ in range(sets):
        q.append(torch.randn(B, H, 1, D, device=device, dtype=dt, generator=gen))
        k.append(torch.randn(B, Hkv, Tk, D, device=device, dtype=dt, generator=gen))
        v.append(torch.randn(B, Hkv, Tk, D, device=device, dtype=dt, generator=gen))
    return q, k, v


def sdpa_decode(F, q, k, v):
    """One decode call: the single query row is the newest position, so it attends to every key
    (is_causal=False; is_causal=True would align the mask top-left and let it see key 0 only).
    Grouped K/V heads go to SDPA as they are, with enable_gqa (PyTorch >= 2.5), not expanded."""
    kw = {'enable_gqa': True} if k.shape[1] < q.shape[1] else {}
    return F.scaled_dot_product_attention(q, k, v, is_causal=False, **kw)


def decode_reference(torch, q, k, v):
    """softmax(q k^T / sqrt(D)) v in float32, K/V heads repeated for GQA: what sdpa_decode must
    give (--dry-run checks it on the CPU)."""
    rep = q.shape[1] // k.shape[1]
    kf = k.float().repeat_interleave(rep, dim=1)
    vf = v.float().repeat_interleave(rep, dim=1)
    s = q.float() @ kf.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(s, dim=-1) @ vf


def sdpa_refusal(torch, backend, call):
    """'' when `call` runs under `backend` alone, else 'refused: <error's first line> (<SDPA's
    first reason>)': SDPA raises 'No available kernel' and gives the reasons as warnings."""
    import warnings
    from torch.nn.attention import sdpa_kernel
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        try:
            with torch.no_grad(), sdpa_kernel(backend):
                call()
            torch.cuda.synchronize()
            return ''
        except Exception as e:  # the backend refused (or failed on) these inputs
            reasons = [first_line(w.message) for w in caught
                       if str(w.message).strip() and not str(w.message).strip().endswith(':')]
            return 'refused: %s%s' % (first_line(e), ' (%s)' % reasons[0][:200] if reasons else '')


def decode_rows(torch, case, dims, reps, gen):
    """Every SDPA backend on one decode case: [(op, peer, B, Tk, H, dims, fwd_us, '', note)],
    printed as they come. The inputs are built once and shared by the backends."""
    B, Tk, H, Hkv, D = case
    sets = decode_sets(B, Tk, Hkv, D)
    F = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q, k, v = decode_inputs(torch, B, Tk, H, Hkv, D, sets, gen)
    except Exception as e:  # an old torch (no torch.nn.attention) or no memory: every row says so
        traceback.print_exc()
        return [('decode', peer, B, Tk, H, dims, '', '', 'failed: %s' % first_line(e))
                for peer, _ in SDPA_BACKENDS]
    rows = []
    for peer, member in SDPA_BACKENDS:
        backend = getattr(SDPBackend, member, None)
        us, note = '', ''
        if backend is None:
            note = 'refused: this torch (%s) has no SDPBackend.%s' % (torch.__version__, member)
        else:
            note = sdpa_refusal(torch, backend, lambda: sdpa_decode(F, q[0], k[0], v[0]))
        if not note:
            def fn(backend=backend):
                with torch.no_grad(), sdpa_kernel(backend):
                    for i in range(sets):
                        sdpa_decode(F, q[i], k[i], v[i])
            try:
                us = '%.2f' % (time_us(torch, fn, reps) / sets)
            except Exception as e:  # accepted the inputs, then failed while timed
                traceback.print_exc()
                note = 'failed: %s' % first_line(e)
        rows.append(('decode', peer, B, Tk, H, dims, us, '', note))
        gbps = decode_kv_bytes(B, Tk, Hkv, D) / (float(us) * 1e3) if us else 0.0
        print('%-6s %-14s B%-2d Tk%-7d %-14s sets %d  fwd %9s us %6.0f GB/s %s' %
              ('decode', peer, B, Tk, dims, sets, us or '-', gbps, note), flush=True)
    q = k = v = None  # free this case's cache (the closures hold names, not tensors)
    torch.cuda.empty_cache()
    return rows


def dry_run(plan):
    """No GPU: print the plan; build each decode case's inputs on the CPU at Tk <= 64 and check
    them, and (where this torch has SDPA) sdpa_decode against decode_reference, GQA included.
    Returns the number of failed checks."""
    import torch
    print('# dry run, torch %s on the CPU' % torch.__version__)
    bad = 0
    gen = torch.Generator(device='cpu').manual_seed(0)
    has_sdpa = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
    for op, peer, case, dims in plan:
        if op != 'decode':
            print('%-6s %-9s %s T%d: needs the GPU and --peers (not built)' % (op, peer, dims,
                                                                          case[0]))
            continue
        B, Tk, H, Hkv, D = case
        sets = decode_sets(B, Tk, Hkv, D)
        t = min(Tk, 64)
        q, k, v = decode_inputs(torch, B, t, H, Hkv, D, min(sets, 2), gen, device='cpu')
        ok = (list(q[0].shape) == [B, H, 1, D] and list(k[0].shape) == [B, Hkv, t, D] and
              k[0].shape == v[0].shape and all(x.is_contiguous() for x in q + k + v) and
              q[0].dtype == torch.bfloat16 and 1 <= sets <= 8 and
              sets * decode_kv_bytes(B, Tk, Hkv, D) >=
              min(256e6, 8 * decode_kv_bytes(B, Tk, Hkv, D)))
        bad += not ok
        print('%-6s B%-2d Tk%-7d %-14s sets %d (%.0f MB of K+V a call) peers %s: inputs %s' % (
            op, B, Tk, dims, sets, sets * decode_kv_bytes(B, Tk, Hkv, D) / 1e6,
            ','.join(p for p, _ in SDPA_BACKENDS), 'ok' if ok else 'WRONG'))
    # the call itself, MHA and GQA, in float32 (the CPU's SDPA has no bf16 flash path to compare)
    for H, Hkv in ((32, 32), (32, 8)):
        q, k, v = decode_inputs(torch, 2, 48, H, Hkv, 64, 1, gen, device='cpu',
                                dtype=torch.float32)
        if not has_sdpa:
            print('sdpa_decode H%d Hkv%d: torch %s has no scaled_dot_product_attention: not called'
                  % (H, Hkv, torch.__version__))
            continue
        err = (sdpa_decode(torch.nn.functional, q[0], k[0], v[0]) -
               decode_reference(torch, q[0], k[0], v[0])).abs().max().item()
        bad += not err < 1e-4
        print('sdpa_decode H%d Hkv%d vs softmax(q k^T) v: max |diff| %.2e %s' %
              (H, Hkv, err, 'ok' if err < 1e-4 else 'WRONG'))
    return bad


def profile_kernels(torch, fn, label, fh):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    fh.write('## %s (3 calls)\n' % label)
    fh.write(prof.key_averages().table(sort_by='cuda_time_total', row_limit=25))
    fh.write('\n')


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out')
    ap.add_argument('--peers', help="folder holding mamba_ssm/, fla/, einops/ (ssd and gdn)")
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--only', help='comma list of groups: %s (default all)' % ','.join(GROUPS))
    ap.add_argument('--profile')
    ap.add_argument('--seq', help='ssd, gdn: comma list of T to keep (default: every case)')
    ap.add_argument('--heads', help='ssd, gdn: comma list of H to keep (default: every case)')
    ap.add_argument('--no-force-fla-bwd', action='store_true',
                    help="leave fla's backward refused on Triton < 3.7.1 (no forced timing)")
    ap.add_argument('--dry-run', action='store_true',
                    help='no GPU: print the plan, build decode inputs on the CPU, write nothing')
    args = ap.parse_args()
    groups = [g for g in (args.only or ','.join(GROUPS)).split(',') if g]
    for g in groups:
        if g not in GROUPS:
            ap.error('--only: %r is not one of %s' % (g, ','.join(GROUPS)))
    plan = []
    if 'ssd' in groups:
        plan += [('ssd', 'mamba_ssm', c, 'H%d P%d N%d' % c[1:]) for c in SSD_CASES]
    if 'gdn' in groups:
        plan += [('gdn', 'fla', c, 'H%d K%d V%d' % c[1:]) for c in GDN_CASES]
    if args.seq:
        keep = {int(t) for t in args.seq.split(',') if t}
        plan = [p for p in plan if p[2][0] in keep]
    if args.heads:
        bad = [h for h in args.heads.split(',') if h and not h.isdigit()]
        if bad:
            ap.error('--heads: %r is not a head count' % bad[0])
        heads = {int(h) for h in args.heads.split(',') if h}
        plan = [p for p in plan if p[2][1] in heads]
        if not plan:
            ap.error('--heads %s: no ssd or gdn case has those heads (ssd: %s; gdn: %s)' % (
                args.heads, ','.join(sorted({str(c[1]) for c in SSD_CASES})),
                ','.join(sorted({str(c[1]) for c in GDN_CASES}))))
    if 'decode' in groups:  # after the scans; --seq does not apply (Tk is not their T)
        plan += [('decode', 'sdpa', c, 'H%d Hkv%d D%d' % c[2:]) for c in DECODE_CASES]
    if args.dry_run:
        sys.exit(1 if dry_run(plan) else 0)
    if any(p[0] != 'decode' for p in plan) and not args.peers:
        ap.error('--peers DIR is needed for ssd and gdn (or give --only decode)')
    if args.peers:
        sys.path.insert(0, args.peers)
    try:
        import torch
    except ImportError as e:
        sys.exit('peer_kernels.py: cannot import torch (%s): run it with the GPU machine\'s PyTorch'
                 % e)
    if not torch.cuda.is_available():
        print('peer_kernels.py: no CUDA GPU visible to PyTorch: nothing to time', file=sys.stderr)
        sys.exit(2)
    try:
        import triton
        tv = triton.__version__
    except ImportError:  # decode needs no Triton; ssd and gdn will say what is missing
        tv = 'none'
    print('# torch %s, triton %s on %s' % (torch.__version__, tv, torch.cuda.get_device_name()),
          flush=True)
    gen = torch.Generator(device='cuda').manual_seed(0)
    rows = []
    prof = open(args.profile, 'w') if args.profile else None

    def write_rows():  # after every case (temp + rename): a call cut short keeps what it timed
        tmp = args.out + '.tmp'
        with open(tmp, 'w') as fh:
            fh.write('op,peer,B,T,H,dims,fwd_us,fwdbwd_us,note\n')
            for r in rows:
                fh.write(','.join(str(v).replace(',', ';') for v in r) + '\n')
        os.replace(tmp, args.out)

    for op, peer, case, dims in plan:
        if op == 'decode':
            rows += decode_rows(torch, case, dims, args.reps, gen)
            write_rows()
            continue
        T = case[0]
        try:
            make = ssd_case if op == 'ssd' else gdn_case
            B, fwd, fwdbwd = make(torch, *case, gen)
            f = time_us(torch, fwd, args.reps)
        except Exception as e:  # the peer itself failed: report it, go on
            traceback.print_exc()
            rows.append((op, peer, TOKENS // T, T, case[1], dims, '', '', 'forward failed: %s' %
                         first_line(e)))
            write_rows()
            continue
        note, fb = '', ''
        try:
            fb = '%.1f' % time_us(torch, fwdbwd, args.reps)
        except Exception as e:
            note = 'backward failed: %s' % first_line(e)
            if peer == 'fla' and '3.7.1' in str(e) and not args.no_force_fla_bwd:
                try:
                    import fla.ops.common.chunk_o as chunk_o
                    chunk_o.TRITON_ABOVE_3_7_1 = True  # timing only: see the header
                    fb = '%.1f' % time_us(torch, fwdbwd, args.reps)
                    note += ' | fwd+bwd timed with the check bypassed (gradients wrong on this ' \
                            'Triton; timing only)'
                except Exception as e2:
                    note += ' | bypassed, still failed: %s' % first_line(e2)
        rows.append((op, peer, B, T, case[1], dims, '%.1f' % f, fb, note))
        write_rows()
        print('%-4s %-9s B%-2d T%-6d %-16s fwd %9.1f us  fwd+bwd %9s us %s' %
              (op, peer, B, T, dims, f, fb or '-', note), flush=True)
        if prof and T == 2048:
            profile_kernels(torch, fwd, '%s %s T%d %s forward' % (op, peer, T, dims), prof)
            if fb:
                profile_kernels(torch, fwdbwd, '%s %s T%d %s fwd+bwd' % (op, peer, T, dims), prof)
    if prof:
        prof.close()
    write_rows()

if __name__ == '__main__':
    main()
