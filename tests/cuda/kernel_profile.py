#!/usr/bin/env python3
"""Where a command's GPU time goes, per kernel: runs it under Nsight Compute with one metric
(gpu__time_duration.sum, clocks left alone) and sums the durations by kernel name.

Usage: kernel_profile.py OUT.txt [--skip N] [--count N] [--filter REGEX] -- COMMAND [ARGS...]

--skip/--count: launches to skip, then to profile (ncu's --launch-skip/--launch-count), so that a
training run's start-up can be left out; --filter: ncu's -k regex:REGEX. Every launch is timed
alone (ncu serialises them), so the sums are kernel time without overlap; host gaps are not in
them. Writes OUT.txt (temp + rename): kernel, launches, total ms, mean us, share of the total,
plus the raw CSV next to it (OUT.txt.csv). Needs ncu (the GPU machine has it).
"""
import collections
import csv
import io
import os
import shutil
import subprocess
import sys


def main(argv):
    if "--" not in argv or len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    sep = argv.index("--")
    opts, cmd = argv[1:sep], argv[sep + 1:]
    out = opts[0]
    ncu = ["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv"]
    i = 1
    while i < len(opts):
        if opts[i] == "--skip":
            ncu += ["--launch-skip", opts[i + 1]]
        elif opts[i] == "--count":
            ncu += ["--launch-count", opts[i + 1]]
        elif opts[i] == "--filter":
            ncu += ["-k", "regex:" + opts[i + 1]]
        else:
            print("kernel_profile.py: unknown option %s" % opts[i], file=sys.stderr)
            return 2
        i += 2
    if shutil.which("ncu") is None:
        print("kernel_profile.py: ncu (Nsight Compute) is not on PATH", file=sys.stderr)
        return 1
    r = subprocess.run(ncu + cmd, capture_output=True, text=True)
    lines = r.stdout.splitlines()
    starts = [k for k, l in enumerate(lines) if l.startswith('"ID"')]
    with open(out + ".csv.tmp", "w") as f:
        f.write(r.stdout)
    os.replace(out + ".csv.tmp", out + ".csv")
    if not starts:
        print("kernel_profile.py: ncu reported no kernels (exit %d):\n%s" % (r.returncode, r.stderr[-2000:]),
              file=sys.stderr)
        return 1
    total = collections.defaultdict(float)
    count = collections.Counter()
    for row in csv.DictReader(io.StringIO("\n".join(lines[starts[0]:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        name = row["Kernel Name"]
        name = name.split("(")[0] if not name.startswith("void ") else name[5:].split("(")[0]
        scale = {"ns": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0, "msecond": 1.0, "nsecond": 1e-6}.get(
            row.get("Metric Unit", "ns"), 1e-6)
        total[name] += float(row["Metric Value"].replace(",", "")) * scale
        count[name] += 1
    grand = sum(total.values())
    body = ["%-90s %8s %10s %10s %7s" % ("kernel", "launches", "total ms", "mean us", "share")]
    for name, ms in sorted(total.items(), key=lambda kv: -kv[1]):
        body.append("%-90s %8d %10.2f %10.1f %6.1f%%" % (name[:90], count[name], ms, 1e3 * ms / count[name],
                                                          100 * ms / grand))
    body.append("%-90s %8d %10.2f" % ("all kernels", sum(count.values()), grand))
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(body) + "\n")
    os.replace(out + ".tmp", out)
    print("\n".join(body[:40]))
    return 0 if r.returncode == 0 else r.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv))
