#!/usr/bin/python3
"""Writes a LongBench-format jsonl of synthetic long-context QA examples, for timing the
evaluation harness at LongBench's lengths without LongBench's data (issue #18's target: 16K-token
prompts, <= 128 generated tokens, >= 20 examples per minute).

Usage: make_longbench_like.py OUT_DIR TEXT_FILE [--dataset narrativeqa] [--examples 20]
                              [--context-bytes 16000] [--seed 0]

Each example's context is a window of TEXT_FILE (repeated as needed) of --context-bytes bytes,
starting at a seeded offset, with one sentence "The secret word of example <i> is <word>." placed
at a seeded depth; the question asks for that word and the answer is it. With the byte tokenizer
a byte is a token, so --context-bytes is the prompt length in tokens (plus the dataset's
template). Writes OUT_DIR/<dataset>.jsonl (temp + rename); the fields are LongBench's (input,
context, answers, length, dataset, language, all_classes, _id). Scores on random weights are
meaningless; this measures time.
"""
import json
import os
import random
import sys

WORDS = ["amber", "basalt", "cobalt", "dune", "ember", "fjord", "granite", "harbor", "indigo",
         "juniper", "kelp", "lagoon", "meadow", "nectar", "obsidian", "prairie", "quartz", "rivulet"]


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out_dir, text_file = argv[1], argv[2]
    opts = {"--dataset": "narrativeqa", "--examples": "20", "--context-bytes": "16000", "--seed": "0"}
    rest = argv[3:]
    if len(rest) % 2:
        print("make_longbench_like.py: every option takes a value", file=sys.stderr)
        return 2
    for k, v in zip(rest[::2], rest[1::2]):
        if k not in opts:
            print("make_longbench_like.py: unknown option %s (known: %s)" % (k, ", ".join(opts)), file=sys.stderr)
            return 2
        opts[k] = v
    try:
        n, size, seed = int(opts["--examples"]), int(opts["--context-bytes"]), int(opts["--seed"])
    except ValueError as e:
        print("make_longbench_like.py: %s" % e, file=sys.stderr)
        return 2
    if n < 1 or size < 200:
        print("make_longbench_like.py: --examples must be >= 1 and --context-bytes >= 200", file=sys.stderr)
        return 2
    with open(text_file, encoding="utf-8", errors="replace") as f:
        text = " ".join(f.read().split())  # one line of ASCII-ish prose
    if not text:
        print("make_longbench_like.py: %s is empty" % text_file, file=sys.stderr)
        return 2
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        word = rng.choice(WORDS)
        needle = " The secret word of example %d is %s. " % (i, word)
        body = size - len(needle)
        start = rng.randrange(len(text))
        window = (text * (body // len(text) + 2))[start:start + body]
        at = window.find(" ", rng.randrange(body + 1))  # at a word boundary
        at = body if at < 0 else at
        context = window[:at] + needle + window[at:]
        rows.append({"input": "What is the secret word of example %d?" % i, "context": context,
                     "answers": [word], "length": len(context.split()), "dataset": opts["--dataset"],
                     "language": "en", "all_classes": None, "_id": "synthetic-%d" % i})
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, opts["--dataset"] + ".jsonl")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, path)
    print("wrote %s: %d examples of %d context bytes" % (path, n, size))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
