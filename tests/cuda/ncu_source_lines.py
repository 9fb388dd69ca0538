#!/usr/bin/env python3
"""Where one kernel's issued instructions and stalls sit, by source line: reads Nsight Compute's
source page as CSV and sums it per CUDA source line, plus the SASS opcode mix.

Usage: ncu_source_lines.py SOURCE.csv [--top N]

SOURCE.csv comes from the GPU machine (build with CUDAFLAGS=-lineinfo so that SASS maps to lines):
    ncu --clock-control none --section SourceCounters --import-source yes -k regex:KERNEL -c 1 \\
        -o rep COMMAND...
    ncu --import rep.ncu-rep --page source --csv --print-source cuda,sass > SOURCE.csv
The page lists, per source file ("File Path" rows), the CUDA lines (a line number in the first
column) each followed by its SASS instructions (an address in the third column); the columns
"Instructions Executed" (warp-level) and "Warp Stall Sampling (All Samples)" are summed over a
line's instructions already. Prints the top N lines (default 30) by instructions, with their share
of instructions and of stall samples, file:line and the source text, then the opcode mix (first
word of each SASS instruction, predicates dropped, suffixes after the first dot dropped).

This is the view that found, in 2026-12-01's session 2 (tests/cuda/RESULTS.md), the integer index
arithmetic, per-piece divisions and per-fragment scaling that made the SSD and gated-delta kernels
issue-bound. Exit 1 with a message when the file has no source page in it.
"""
import collections
import csv
import sys

INST = "Instructions Executed"
STALL = "Warp Stall Sampling (All Samples)"


def count(text):
    try:
        return int(text.replace(",", ""))
    except ValueError:
        return 0


def summarise(rows):
    """(per_line, opcodes, totals): per_line maps (file, line) to [instructions, stalls, text]."""
    per_line = collections.OrderedDict()
    opcodes = collections.Counter()
    totals = [0, 0]
    path, header = None, None
    for row in rows:
        if not row:
            continue
        if row[0] == "File Path":
            path = row[1].rsplit("/", 1)[-1]
            continue
        if row[0] == "Line No":
            header = row
            continue
        if header is None or len(row) < len(header):
            continue
        inst, stall = count(row[header.index(INST)]), count(row[header.index(STALL)])
        if row[0]:  # a CUDA source line: its counts are the sums over its instructions
            entry = per_line.setdefault((path, int(row[0])), [0, 0, row[1].strip()])
            entry[0] += inst
            entry[1] += stall
            totals[0] += inst
            totals[1] += stall
        elif row[2] not in ("", "..."):  # a SASS instruction under the line above
            words = row[3].split()
            if words and words[0].startswith("@"):
                words = words[1:]
            if words:
                opcodes[words[0].split(".")[0]] += inst
    return per_line, opcodes, totals


def main(argv):
    if len(argv) < 2 or argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    top = 30
    if len(argv) == 4 and argv[2] == "--top":
        top = int(argv[3])
    elif len(argv) != 2:
        print("ncu_source_lines.py: usage: SOURCE.csv [--top N]", file=sys.stderr)
        return 2
    with open(argv[1], newline="") as f:
        per_line, opcodes, totals = summarise(csv.reader(f))
    if not per_line:
        print("ncu_source_lines.py: %s holds no source page (ncu --page source --csv "
              "--print-source cuda,sass)" % argv[1], file=sys.stderr)
        return 1
    inst_total, stall_total = max(totals[0], 1), max(totals[1], 1)
    print("%d warp instructions, %d stall samples" % (totals[0], totals[1]))
    print("%7s %7s  %s" % ("inst", "stalls", "line"))
    ranked = sorted(per_line.items(), key=lambda kv: -kv[1][0])[:top]
    for (path, line), (inst, stall, text) in ranked:
        print("%6.1f%% %6.1f%%  %s:%d  %s" % (100.0 * inst / inst_total, 100.0 * stall / stall_total,
                                              path, line, text[:100]))
    op_total = max(sum(opcodes.values()), 1)
    print("opcodes: " + ", ".join("%s %.1f%%" % (op, 100.0 * n / op_total)
                                  for op, n in opcodes.most_common(20)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
