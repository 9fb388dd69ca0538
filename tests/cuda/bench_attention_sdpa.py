#!/usr/bin/env python3
"""Times PyTorch's torch.nn.functional.scaled_dot_product_attention(is_causal=True) in bf16 on the
shapes of bench-attention (dense rows only): forward, and forward + backward, each the median of N
calls between CUDA events after warm-up. q, k, v have our memory layout [B, T, H, D] (transposed
views to SDPA's [B, H, T, D]), as a model would hand them. Writes a CSV:
case,B,T,H,D,fwd_us,fwdbwd_us,bwd_us (bwd = fwd+bwd - fwd).

usage: bench_attention_sdpa.py OUT.csv [--reps N]
Needs a CUDA GPU (exits with status 2 and says so otherwise).
"""
import argparse
import statistics
import sys

TOKENS = 16384
CASES = [(2048, 32, 64), (4096, 32, 64), (8192, 32, 64), (16384, 32, 64), (4096, 16, 128)]


def time_us(torch, fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('out')
    ap.add_argument('--reps', type=int, default=20)
    args = ap.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        sys.exit('bench_attention_sdpa.py: cannot import torch (%s): run it with the GPU machine\'s '
                 'PyTorch' % e)
    if not torch.cuda.is_available():
        print('bench_attention_sdpa.py: no CUDA GPU visible to PyTorch %s: nothing to time' %
              torch.__version__, file=sys.stderr)
        sys.exit(2)
    print('# torch %s on %s' % (torch.__version__, torch.cuda.get_device_name()))
    rows = []
    gen = torch.Generator(device='cuda').manual_seed(0)
    for T, H, D in CASES:
        B = TOKENS // T

        def make():
            x = torch.randn(B, T, H, D, device='cuda', dtype=torch.bfloat16, generator=gen)
            return x.transpose(1, 2).detach().requires_grad_(True)

        q, k, v = make(), make(), make()
        dout = torch.randn(B, H, T, D, device='cuda', dtype=torch.bfloat16, generator=gen)

        def fwd():
            with torch.no_grad():
                F.scaled_dot_product_attention(q, k, v, is_causal=True)

        def fwdbwd():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            q.grad = k.grad = v.grad = None
            o.backward(dout)

        f = time_us(torch, fwd, args.reps)
        fb = time_us(torch, fwdbwd, args.reps)
        name = 'dense T%d H%d D%d' % (T, H, D)
        rows.append((name, B, T, H, D, f, fb, fb - f))
        flops = 2.0 * 2.0 * B * H * T * T * D / 2.0
        print('%-24s %4d fwd %9.1f us (%6.1f TF/s)  fwd+bwd %9.1f us (%6.1f TF/s)' %
              (name, B, f, flops / f * 1e-6, fb, 3.5 * flops / fb * 1e-6), flush=True)
    tmp = args.out + '.tmp'
    with open(tmp, 'w') as fh:
        fh.write('case,B,T,H,D,fwd_us,fwdbwd_us,bwd_us\n')
        for r in rows:
            fh.write('%s,%d,%d,%d,%d,%.2f,%.2f,%.2f\n' % r)
    import os
    os.replace(tmp, args.out)
    print('wrote %s' % args.out)


if __name__ == '__main__':
    main()
