#!/usr/bin/env python3
"""What bounds each profiled kernel launch, from Nsight Compute's raw page: duration, registers,
achieved occupancy, the SM / memory / DRAM throughputs, issue and tensor-pipe activity, and the
warp stall reasons that cost the most cycles per issued instruction.

Usage: ncu_sections.py RAW.csv [--top N]

RAW.csv comes from the GPU machine:
    ncu --set full --import-source no -k regex:KERNEL --launch-count N -o rep COMMAND...
    ncu -i rep.ncu-rep --page raw --csv > RAW.csv
The raw page is one header row of metric names, one row of units, then one row per launch.
Metrics are looked up by name, each from a list of names that Nsight Compute versions use;
one that the file lacks prints as "-". Stall reasons are every column named
smsp__average_warp_latency_issue_stalled_<reason>.ratio (or, in other versions,
smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio): warp cycles per issued
instruction spent stalled for that reason; the top N (default 5) are printed per launch with
their share of all stall cycles. The view for a kernel that is neither at the memory roofline
nor at the tensor pipe's peak (the GDN chain and prepare of tests/cuda/RESULTS.md, session 11):
it says whether the warps wait on memory (long_scoreboard), on barriers (barrier), on other
math (wait, math_pipe_throttle, mio_throttle) or on nothing (not_selected, selected).
Exit 1 with a message when the file holds no launch.
"""
import csv
import re
import sys

# (label, format, candidate metric names in order of preference)
METRICS = [
    ("us", "{:.1f}", ["gpu__time_duration.sum"]),
    ("regs", "{:.0f}", ["launch__registers_per_thread"]),
    ("occ%", "{:.0f}", ["sm__warps_active.avg.pct_of_peak_sustained_active"]),
    ("sm%", "{:.0f}", ["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("mem%", "{:.0f}", ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("dram%", "{:.0f}", ["dram__throughput.avg.pct_of_peak_sustained_elapsed",
                         "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"]),
    ("issue%", "{:.0f}", ["sm__inst_issued.avg.pct_of_peak_sustained_active",
                          "smsp__issue_active.avg.pct_of_peak_sustained_active"]),
    ("tensor%", "{:.0f}", ["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                           "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active"]),
]
STALL = [re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)\.ratio$"),
         re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")]
NAME_COLUMNS = ["Kernel Name", "Function Name"]


def number(text):
    try:
        return float(text.replace(",", ""))
    except (AttributeError, ValueError):
        return None


def short_name(name):
    """'void (anonymous namespace)::gdn_fwd<64, a::B>(float*)' -> 'gdn_fwd<64, a::B>'."""
    name = name.strip().replace("(anonymous namespace)::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list: the first '(' outside <...>
        depth += (ch == "<") - (ch == ">")
        if ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut].strip()
    if name.startswith("void "):
        name = name[5:]
    lt = name.find("<")
    head, args = (name, "") if lt < 0 else (name[:lt], name[lt:])
    return head.split("::")[-1] + args


def read(path):
    """(header, units, launches): the units row (under the header) may be absent."""
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f)]
    header = next((r for r in rows if any(n in r for n in NAME_COLUMNS)), None)
    if header is None:
        return None, None, []
    start = rows.index(header) + 1
    data = [r for r in rows[start:] if len(r) == len(header)]
    # the units row: no launch ID, no kernel name
    name_col = next(header.index(n) for n in NAME_COLUMNS if n in header)
    units = None
    if data and not data[0][name_col].strip():
        units, data = data[0], data[1:]
    return header, units, data


def summarise(header, row, top, unit_scale=None):
    unit_scale = unit_scale or {}
    col = {n: i for i, n in enumerate(header)}
    name_col = next(n for n in NAME_COLUMNS if n in col)
    out = {"kernel": short_name(row[col[name_col]])}
    for label, fmt, names in METRICS:
        value = next((number(row[col[n]]) for n in names if n in col and number(row[col[n]]) is not None), None)
        if label == "us" and value is not None:
            value *= unit_scale.get(names[0], 1.0)
        out[label] = "-" if value is None else fmt.format(value)
    stalls = []
    for name, i in col.items():
        for pattern in STALL:
            m = pattern.match(name)
            if m and number(row[i]) is not None:
                stalls.append((m.group(1), number(row[i])))
    total = sum(v for _, v in stalls)
    stalls.sort(key=lambda s: -s[1])
    out["stalls"] = [(r, v, v / total if total > 0 else 0.0) for r, v in stalls[:top]]
    return out


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    top = 5
    if "--top" in argv:
        top = int(argv[argv.index("--top") + 1])
    header, units, data = read(argv[1])
    if not data:
        print("ncu_sections.py: %s holds no kernel launch (expected ncu --page raw --csv)" % argv[1],
              file=sys.stderr)
        return 1
    # The duration's unit: ncu writes ns, usecond, msecond ...
    scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
    unit_scale = {}
    if units and "gpu__time_duration.sum" in header:
        unit = units[header.index("gpu__time_duration.sum")].strip()
        unit_scale["gpu__time_duration.sum"] = scale.get(unit, 1.0)
    labels = [m[0] for m in METRICS]
    print("%-64s " % "kernel" + " ".join("%7s" % l for l in labels) + "  top stalls (cycles per issue, share)")
    for row in data:
        s = summarise(header, row, top, unit_scale)
        stalls = ", ".join("%s %.2f (%.0f%%)" % (r, v, 100 * p) for r, v, p in s["stalls"])
        print("%-64s " % s["kernel"][:64] + " ".join("%7s" % s[l] for l in labels) + "  " + stalls)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
