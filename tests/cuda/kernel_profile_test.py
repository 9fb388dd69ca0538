#!/usr/bin/env python3
"""kernel_profile.py without a GPU: a stand-in `ncu` on PATH prints a hand-written Nsight Compute
CSV (a kernel launched twice, another once, with a second metric row and ncu's "==PROF==" chatter
around it); the table must sum the durations by kernel name (namespaces and template arguments
kept, parameter lists dropped), count the launches, give each kernel's share, keep the raw CSV
beside it, and exit 2 on a bad option and 1 with a message when ncu is missing."""
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "kernel_profile.py")

CSV = '''==PROF== Connected to process 1 (/bin/true)
==PROF== Profiling "scan_kernel" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","true","h","void ssd::<unnamed>::scan_kernel<__nv_bfloat16>(const T1 *, int)","1","7","(256, 1, 1)","(32, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","1,500,000"
"0","1","true","h","void ssd::<unnamed>::scan_kernel<__nv_bfloat16>(const T1 *, int)","1","7","(256, 1, 1)","(32, 8, 1)","0","9.0","Command line profiler metrics","sm__cycles_elapsed.avg","cycle","999,999"
"1","1","true","h","gemm_sm90(float *)","1","7","(128, 1, 1)","(66, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us","3,000"
"2","1","true","h","void ssd::<unnamed>::scan_kernel<__nv_bfloat16>(const T1 *, int)","1","7","(256, 1, 1)","(32, 8, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ns","500,000"
==PROF== Disconnected from process 1
'''


def fail(msg):
    print("kernel_profile_test: FAIL: " + msg)
    sys.exit(1)


def main():
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "bin")
        os.mkdir(fake)
        with open(os.path.join(d, "ncu.csv"), "w") as f:
            f.write(CSV)
        ncu = os.path.join(fake, "ncu")
        with open(ncu, "w") as f:
            f.write("#!/bin/sh\ncat '%s'\n" % os.path.join(d, "ncu.csv"))
        os.chmod(ncu, os.stat(ncu).st_mode | stat.S_IEXEC)
        out = os.path.join(d, "table.txt")
        env = dict(os.environ, PATH=fake + os.pathsep + os.environ.get("PATH", ""))
        r = subprocess.run([sys.executable, TOOL, out, "--filter", "scan", "--", "true"], env=env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            fail("exit %d: %s" % (r.returncode, r.stderr))
        lines = open(out).read().splitlines()
        rows = {l[:90].strip(): l[90:].split() for l in lines[1:]}
        scan = rows.get("ssd::<unnamed>::scan_kernel<__nv_bfloat16>")
        gemm = rows.get("gemm_sm90")
        total = rows.get("all kernels")
        if not scan or not gemm or not total:
            fail("rows missing in\n" + "\n".join(lines))
        # scan: 1.5 ms + 0.5 ms over 2 launches (the cycle row is not a duration); gemm: 3000 us.
        if scan[:4] != ["2", "2.00", "1000.0", "40.0%"]:
            fail("scan_kernel row %s" % scan)
        if gemm[:4] != ["1", "3.00", "3000.0", "60.0%"]:
            fail("gemm row %s" % gemm)
        if total[:2] != ["3", "5.00"]:
            fail("total row %s" % total)
        if not lines[1].startswith("gemm_sm90"):
            fail("rows are not sorted by time:\n" + "\n".join(lines))
        if open(out + ".csv").read() != CSV:
            fail("the raw CSV was not kept beside the table")

        r = subprocess.run([sys.executable, TOOL, out, "--bogus", "1", "--", "true"], env=env,
                           capture_output=True, text=True)
        if r.returncode != 2 or "unknown option --bogus" not in r.stderr:
            fail("a bad option: exit %d, %r" % (r.returncode, r.stderr))
        r = subprocess.run([sys.executable, TOOL, out, "--", "true"], env=dict(os.environ, PATH=d),
                           capture_output=True, text=True)
        if r.returncode != 1 or "ncu (Nsight Compute) is not on PATH" not in r.stderr:
            fail("ncu missing: exit %d, %r" % (r.returncode, r.stderr))
    print("kernel_profile_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
