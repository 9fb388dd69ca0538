#!/usr/bin/env python3
"""Times the peers' own scan kernels at our benchmark shapes: mamba_ssm's mamba_chunk_scan_combined
(Mamba2 SSD, Triton) and flash-linear-attention's chunk_gated_delta_rule (Triton), forward and
forward + backward, bf16, 16K tokens per call. Each time is per call: the call replayed from a CUDA
graph N times back to back between CUDA events (or issued back to back where it cannot be
captured), median of 5 rounds, after warm-up (the first calls also run Triton's autotuning).
Inputs are random (never zeros), in the layouts the peers take: x [B,T,H,P], dt [B,T,H]
(already positive: no softplus, no dt_bias, as our scan takes it), A [H] < 0, B/C [B,T,G,N], D [H]; q/k [B,T,H,K] with rows of
unit norm (as the model's L2 norm gives), v [B,T,H,V], g [B,T,H] log-decay < 0, beta in (0,1).

The peers' sources are not part of this repository: fetch state-spaces/mamba and
fla-org/flash-linear-attention (and einops) into a git-ignored folder and pass it as --peers
(the folder holding mamba_ssm/, fla/, einops/). mamba_ssm's and fla's top-level __init__ import
their CUDA extensions and model zoos: the folder's copies of mamba_ssm/__init__.py,
fla/__init__.py, fla/ops/__init__.py and fla/modules/__init__.py are emptied so the ops load alone
(tests/cuda/README.md, "The peers", says how the folder is made).

usage: peer_kernels.py OUT.csv --peers DIR [--reps N] [--only ssd|gdn] [--seq 2048,16384]
                       [--profile OUT.txt]
                       [--no-force-fla-bwd]
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
    ap.add_argument('--peers', required=True)
    ap.add_argument('--reps', type=int, default=20)
    ap.add_argument('--only', choices=['ssd', 'gdn'])
    ap.add_argument('--profile')
    ap.add_argument('--seq', help='comma list of T to keep (default: every case)')
    ap.add_argument('--no-force-fla-bwd', action='store_true',
                    help="leave fla's backward refused on Triton < 3.7.1 (no forced timing)")
    args = ap.parse_args()
    sys.path.insert(0, args.peers)
    try:
        import torch
    except ImportError as e:
        sys.exit('peer_kernels.py: cannot import torch (%s): run it with the GPU machine\'s PyTorch'
                 % e)
    if not torch.cuda.is_available():
        print('peer_kernels.py: no CUDA GPU visible to PyTorch: nothing to time', file=sys.stderr)
        sys.exit(2)
    import triton
    print('# torch %s, triton %s on %s' % (torch.__version__, triton.__version__,
                                          torch.cuda.get_device_name()), flush=True)
    gen = torch.Generator(device='cuda').manual_seed(0)
    rows = []
    prof = open(args.profile, 'w') if args.profile else None
    plan = []
    if args.only in (None, 'ssd'):
        plan += [('ssd', 'mamba_ssm', c, 'H%d P%d N%d' % c[1:]) for c in SSD_CASES]
    if args.only in (None, 'gdn'):
        plan += [('gdn', 'fla', c, 'H%d K%d V%d' % c[1:]) for c in GDN_CASES]
    if args.seq:
        keep = {int(t) for t in args.seq.split(',') if t}
        plan = [p for p in plan if p[2][0] in keep]
    def write_rows():  # after every case (temp + rename): a call cut short keeps what it timed
        tmp = args.out + '.tmp'
        with open(tmp, 'w') as fh:
            fh.write('op,peer,B,T,H,dims,fwd_us,fwdbwd_us,note\n')
            for r in rows:
                fh.write(','.join(str(v).replace(',', ';') for v in r) + '\n')
        os.replace(tmp, args.out)

    for op, peer, case, dims in plan:
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
