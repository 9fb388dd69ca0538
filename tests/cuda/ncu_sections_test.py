#!/usr/bin/env python3
"""ncu_sections.py on a hand-written raw page (no GPU): names shortened, the duration in us from
ns, metrics a version lacks as '-', the alternative metric names, stall reasons ranked with their
shares, and a file without launches refused."""
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "ncu_sections.py")

HEADER = ["ID", "Process ID", "Kernel Name", "gpu__time_duration.sum", "launch__registers_per_thread",
          "sm__warps_active.avg.pct_of_peak_sustained_active",
          "sm__throughput.avg.pct_of_peak_sustained_elapsed",
          "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
          "smsp__average_warp_latency_issue_stalled_barrier.ratio",
          "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio",
          "smsp__average_warp_latency_issue_stalled_wait.ratio",
          "smsp__average_warp_latency_issue_stalled_selected.ratio"]
UNITS = ["", "", "", "nsecond", "register/thread", "%", "%", "%", "", "", "", ""]
ROWS = [["0", "77", "void (anonymous namespace)::gdn_fwd_fused2_kernel<64, 4, 3>(const bf16_t *, int)",
         "245,300", "168", "18.5", "40.2", "35.0", "1.5", "6.0", "2.0", "0.5"],
        ["1", "77", "void amor::cuda::gdn::gdn_prepare_reg_kernel<Shape<64, 128, 64, 1>, (PrepOut)1>(Dims)",
         "81000", "72", "60.0", "55.0", "20.0", "", "3.0", "1.0", "1.0"]]


def write(path, rows):
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for r in rows:
            w.writerow(r)


def main():
    failures = []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what)
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "raw.csv")
        write(raw, [["==PROF== a preamble line"], HEADER, UNITS] + ROWS)
        r = subprocess.run([sys.executable, TOOL, raw, "--top", "2"], capture_output=True, text=True)
        out = r.stdout
        print(out)
        lines = out.splitlines()
        check(r.returncode == 0, "exit 0")
        check(len(lines) == 3, "a header and one line per launch")
        first, second = lines[1], lines[2]
        check(first.startswith("gdn_fwd_fused2_kernel<64, 4, 3> "), "namespace, void and parameters dropped")
        check(second.startswith("gdn_prepare_reg_kernel<Shape<64, 128, 64, 1>, (PrepOut)1> "),
              "template arguments kept")
        check(" 245.3 " in first and " 81.0 " in second, "durations in us from nanoseconds (with a thousands comma)")
        check(" 168 " in first and " 72 " in second, "registers")
        check(" 35 " in first, "dram% from gpu__dram_throughput (the alternative name)")
        check(first.count(" - ") >= 3, "missing metrics (mem%, issue%, tensor%) print as -")
        check("long_scoreboard 6.00 (60%)" in first and "wait 2.00 (20%)" in first,
              "top stalls ranked with their share of all stall cycles")
        check("barrier" not in first, "--top 2 keeps two")
        check("long_scoreboard 3.00 (60%)" in second, "an empty stall value is skipped")

        empty = os.path.join(tmp, "empty.csv")
        write(empty, [HEADER, UNITS])
        r = subprocess.run([sys.executable, TOOL, empty], capture_output=True, text=True)
        check(r.returncode == 1 and "holds no kernel launch" in r.stderr, "no launch: exit 1 with a message")
        r = subprocess.run([sys.executable, TOOL], capture_output=True, text=True)
        check(r.returncode == 2 and "Usage" in r.stderr, "no argument: usage, exit 2")
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
