"""Runs every case of cases.json through amor-run's C++ scorers (eval_reference_dump cases) and
through the Python transcriptions of the reference scorers (reference_scorers.py); every case must
agree exactly (numbers bit for bit, texts code point for code point; a case where the reference
raises must be an error in C++ too).

    /usr/bin/python3 check_scorers.py EVAL_REFERENCE_DUMP CASES.json
"""
import collections
import json
import subprocess
import sys

import reference_scorers


def same(ours, ref):
    if isinstance(ref, bool) or isinstance(ours, bool):
        return ours == ref
    if isinstance(ref, (int, float)) and isinstance(ours, (int, float)):
        return float(ours) == float(ref)
    return ours == ref


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    dump, cases_path = sys.argv[1], sys.argv[2]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    names = [c["name"] for c in cases]
    dupes = [n for n, k in collections.Counter(names).items() if k > 1]
    if dupes:
        sys.exit("duplicate case names: %s" % dupes)
    out = subprocess.run([dump, "cases", cases_path], check=True, capture_output=True).stdout
    ours = {}
    for line in out.decode("utf-8").split("\n"):  # not splitlines(): \x85, U+2028 ...
        if not line:
            continue
        r = json.loads(line)
        ours[r["name"]] = r
    agree = collections.Counter()
    total = collections.Counter()
    failures = []
    for c in cases:
        op, name = c["op"], c["name"]
        total[op] += 1
        try:
            ref = {"result": reference_scorers.OPS[op](*c["args"])}
        except Exception as e:  # the reference raises (LongBench's retrieval without "Paragraph N")
            ref = {"error": "%s: %s" % (type(e).__name__, e)}
        got = ours.get(name)
        if got is None:
            failures.append("%s: no output from C++" % name)
            continue
        if "error" in ref or "error" in got:
            ok = "error" in ref and "error" in got
        else:
            ok = same(got["result"], ref["result"])
        if ok:
            agree[op] += 1
        else:
            failures.append("%s (%s %s):\n    C++      %s\n    reference %s" % (
                name, op, json.dumps(c["args"], ensure_ascii=False),
                json.dumps(got, ensure_ascii=False), json.dumps(ref, ensure_ascii=False)))
    for op in sorted(total):
        print("%-24s %3d / %3d agree" % (op, agree[op], total[op]))
    print("all: %d / %d" % (sum(agree.values()), sum(total.values())))
    if failures:
        print("\nDISAGREEMENTS:\n" + "\n".join(failures))
        sys.exit(1)


if __name__ == "__main__":
    main()
