#!/usr/bin/env python3
"""Rewrites a CUDA source for the CPU emulator (emu.h): every launch
`kernel<<<grid, block, smem, stream>>>(args);` becomes
`::emu::launch(grid, block, smem, stream, [=]() { kernel(args); });`, and every
`extern __shared__ T name[];` becomes `T* name = ::emu::dyn_smem<T>();`.

usage: to_cpp.py IN.cu OUT.cpp
"""
import re
import sys


def rewrite(src):
    src = re.sub(r'extern\s+__shared__\s+(\w+)\s+(\w+)\[\];', r'\1* \2 = ::emu::dyn_smem<\1>();',
                 src)
    out, i = [], 0
    while True:
        j = src.find('<<<', i)
        if j < 0:
            out.append(src[i:])
            return ''.join(out)
        # The kernel expression runs back to the start of the statement.
        k = j
        while k > 0 and src[k - 1] not in ';{}\n':
            k -= 1
        while src[k] in ' \t':
            k += 1
        end_cfg = src.find('>>>', j)
        if src[end_cfg + 3] != '(':
            sys.exit('to_cpp.py: a launch without an argument list near: ' + src[k:end_cfg + 10])
        # The argument list runs to the matching parenthesis.
        depth, q = 0, end_cfg + 3
        while True:
            depth += {'(': 1, ')': -1}.get(src[q], 0)
            if depth == 0:
                break
            q += 1
        out.append(src[i:k])
        out.append('::emu::launch(%s, [=]() { %s(%s); })' %
                   (src[j + 3:end_cfg], src[k:j], src[end_cfg + 4:q]))
        i = q + 1


if __name__ == '__main__':
    with open(sys.argv[1]) as f:
        text = f.read()
    with open(sys.argv[2], 'w') as f:
        f.write(rewrite(text))
