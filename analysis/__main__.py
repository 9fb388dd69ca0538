"""python3 -m analysis report results/<sweep> [--out DIR]"""
import argparse
import sys

from .report import build


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m analysis",
                                     description="Tables and figures of an amor-run sweep.")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("report", help="write report.md, report.html and figures/*.png")
    rep.add_argument("sweep_dir", help="results/<sweep>: the folder holding index.csv and the run folders")
    rep.add_argument("--out", help="output folder (default: <sweep_dir>/report)")
    args = parser.parse_args(argv)
    try:
        result = build(args.sweep_dir, args.out)
    except FileNotFoundError as e:
        print(f"analysis report: {e}", file=sys.stderr)
        return 2
    print(f"wrote {result['markdown']}, {result['html']} and {len(result['figures'])} figures")
    return 0


if __name__ == "__main__":
    sys.exit(main())
