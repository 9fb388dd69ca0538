#!/usr/bin/env python3
"""ncu_source_lines.py without a GPU, on a hand-written source page in Nsight Compute's CSV layout
(two files, CUDA lines each followed by their SASS rows, "..." gap rows, a predicated
instruction): the lines must come out ranked by instructions with their shares of instructions and
stall samples, the same line number in two files kept apart, the opcodes summed by their first
word (predicate and suffixes dropped); a file without a source page exits 1, bad usage 2."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "ncu_source_lines.py")

HEAD = ('"Line No","Source","Address","Source","Warp Stall Sampling (All Samples)",'
        '"Warp Stall Sampling (Not-issued Samples)","# Samples","Instructions Executed"')
PAGE = "\n".join([
    '"File Path","/src/kernels/ssd/ssd_mma.cuh"',
    '"Function Name","void scan<Shape<64>>(Dims)"',
    HEAD,
    '"293","  cp_async_16(dst, src, valid);","-","-","40","10","40","6,000"',
    '"","","0x10","      LDGSTS.E.128 [R1], desc[UR4][R2.64]","30","0","30","1000"',
    '"","","...","...","-","-","-","-"',
    '"","","0x20","      IMAD.WIDE R2, R3, 0x2, R4","10","0","10","5000"',
    '"172","  ldmatrix_x4(a, p);","-","-","20","5","20","2,000"',
    '"","","0x30","      LDSM.16.M88.4 R8, [R9]","20","0","20","2000"',
    '"File Path","/src/kernels/ssd/ssd_forward_tc_cuda.cu"',
    '"Function Name","void scan<Shape<64>>(Dims)"',
    HEAD,
    '"172","  m = exp2(ci - cm[c]) * dt[c];","-","-","40","20","40","2,000"',
    '"","","0x40","      @P0 MUFU.EX2 R1, R2","25","0","25","1500"',
    '"","","0x50","      FMUL R1, R1, R3","15","0","15","500"',
])


def fail(msg):
    print("ncu_source_lines_test: FAIL: " + msg)
    sys.exit(1)


def run(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        page = os.path.join(d, "page.csv")
        with open(page, "w") as f:
            f.write(PAGE + "\n")
        r = run(page)
        if r.returncode != 0:
            fail("exit %d: %s" % (r.returncode, r.stderr))
        lines = r.stdout.splitlines()
        if lines[0] != "10000 warp instructions, 100 stall samples":
            fail("totals line: %r" % lines[0])
        body = [l for l in lines[2:] if not l.startswith("opcodes:")]
        if len(body) != 3:
            fail("three source lines expected:\n" + r.stdout)
        if not (body[0].startswith("  60.0%   40.0%  ssd_mma.cuh:293") and "cp_async_16" in body[0]):
            fail("first line: %r" % body[0])
        # Line 172 of two files: kept apart, equal counts, both ranked after line 293.
        if not any("ssd_mma.cuh:172" in l and l.startswith("  20.0%   20.0%") for l in body[1:]):
            fail("ssd_mma.cuh:172: %r" % body)
        if not any("ssd_forward_tc_cuda.cu:172" in l and l.startswith("  20.0%   40.0%") for l in body[1:]):
            fail("ssd_forward_tc_cuda.cu:172: %r" % body)
        ops = lines[-1]
        for want in ("IMAD 50.0%", "LDSM 20.0%", "MUFU 15.0%", "LDGSTS 10.0%", "FMUL 5.0%"):
            if want not in ops:
                fail("opcode mix lacks %r: %r" % (want, ops))
        if "@P0" in ops or "WIDE" in ops:
            fail("predicate or suffix kept: %r" % ops)
        r = run(page, "--top", "1")
        if len([l for l in r.stdout.splitlines() if ":" in l and "%" in l and "opcodes" not in l]) != 1:
            fail("--top 1 printed:\n" + r.stdout)
        empty = os.path.join(d, "empty.csv")
        with open(empty, "w") as f:
            f.write('"ID","Kernel Name"\n"0","k"\n')
        r = run(empty)
        if r.returncode != 1 or "no source page" not in r.stderr:
            fail("a file without a source page: exit %d, %r" % (r.returncode, r.stderr))
        if run().returncode != 2 or run(page, "--bogus").returncode != 2:
            fail("bad usage must exit 2")
    print("ncu_source_lines_test: OK")


if __name__ == "__main__":
    main()
