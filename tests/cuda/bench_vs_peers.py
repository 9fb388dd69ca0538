#!/usr/bin/env python3
"""Ours against the peers, side by side in one call (issue #14, item 1): the same shapes, the same
GPU, one table of ratios.

usage: bench_vs_peers.py BIN_DIR OUT_DIR --peers DIR [--only ssd,gdn,attention,decode,models]
                         [--reps N] [--large] [--modes eager,compile] [--micro-batch 4]
                         [--deadline-s S] [--no-force-fla-bwd] [--presets LIST] [--python PY]
                         [--peer-kernels-csv CSV]

BIN_DIR is the build's bin/ (bench-ssd, bench-gdn, bench-attention, amor-run, bench-gemm); DIR
holds the peers' sources (mamba_ssm/, fla/, einops/ and optionally PEERS.txt naming their
commits; tests/cuda/README.md, "The peers"). The Python children run under this interpreter
(the GPU machine's python3, with PyTorch and Triton).

Sections (--only picks; default all five):
  ssd        bench-ssd (ours: SSD H64 P64 N128, chunk 64, bf16, 16K tokens per call, T 2K-16K)
             vs peer_kernels.py ssd (mamba_ssm's mamba_chunk_scan_combined), forward and
             forward + backward, at H64 and (bench-ssd --heads 24) H24.
  gdn        bench-gdn --only scan (ours: H24 K64 V128, chunk 64) vs peer_kernels.py gdn (fla's
             chunk_gated_delta_rule), forward and forward + backward, at H24 K64 V128 and
             (bench-gdn --heads 16 --dk 128 --dv 256) H16 K128 V256.
             fla's backward refuses on Hopper with Triton < 3.7.1: its text is the note, and the
             forward + backward time is of fla's kernels with the check bypassed (timing only).
  attention  bench-attention (our kernels, and cuDNN's fused flash attention as amor-run's
             AMOR_ATTENTION=auto runs it) vs PyTorch SDPA (bench_attention_sdpa.py), causal bf16,
             the same shapes; AMOR's gated rows (22% firing) against SDPA's dense time (what a
             PyTorch AMOR runs: dense attention, masked), the note giving it as a fraction of
             cuDNN's dense time (issue #14's target: <= 0.35).
  decode     bench-attention's decode rows (our split-KV decode kernel, one query row per sequence
             over a KV cache of Tk keys, B 1/8, Tk 4K-128K, H = Hkv = 32, D 64, bf16; taken from the
             attention section's run when it ran, else bench-attention --only decode) vs
             peer_kernels.py decode (PyTorch SDPA at the same shapes, each backend forced alone:
             flash, efficient, cuDNN, math; a backend that refuses is a note). Its table: ours
             (auto, and tiles) us, each backend's us, ours / the best backend's time (< 1 means
             ours is faster: the one ratio here that is ours over the peer's), GB/s of K and V.
  models     bench_train.py (amor-run, bf16, seq 2048) vs peer_models.py (plain PyTorch models of
             the same architecture and parameter count over the peers' kernels, eager and
             torch.compile): transformer, mamba2, gdn, AMOR over mamba2 and over gdn, 180M;
             --large: the 1.5B set instead. AMOR runs with the gate at ~22% firing on both sides.

Ratios (the CSV's ratio column, every section): kernels peer time / our time; models our
tokens/s / the peer's (both: > 1 means ours is faster). Where the parameter counts differ by more
than 0.5%, the ratio per model FLOP (6 * params + 6 * T * d per attention layer, bench_train.py's
count) is given too.

Timing conventions (each tool's header has the details): ours, the median of N calls each between
two CUDA events (our host launch cost is microseconds); peer kernels, the call replayed from a
CUDA graph N times back to back between two events (no Python/Triton launch cost; issued back to
back where capture fails), median of 5 rounds (decode's SDPA backends too: peer_kernels.py); the
attention section's SDPA, per call as ours; models, tokens/s over steady-state steps.

OUT_DIR gets (each written to a temporary name and renamed, after every section, so a call cut
short keeps what it measured):
  vs_peers.md    the tables in Markdown, with date, GPU, versions and commits: for RESULTS.md
  vs_peers.csv   every row: section,case,what,ours,peer,peer_value,unit,ratio,note
  vs_peers.log   every child's command line and output
  raw.txt        the children's own CSVs, one after another
--deadline-s (default 570): a section that would start after this many seconds is skipped with
a "not run: out of time" row (the device call's limit is 600 s).
Our ssd and gdn benchmarks run before the peers' scan kernels (whose first call compiles and
autotunes Triton kernels for minutes), so a cut keeps our side of those rows. --peer-kernels-csv
takes the peers' rows from a peer_kernels.py run made earlier in the same device call instead (so
that its Triton compiling can overlap our build: the GPU is not shared while either times); the
decode section takes its rows from it too when it has some (peer_kernels.py with no --only, or
with decode in it), else runs peer_kernels.py --only decode (seconds: no Triton, no --peers).
"""
import argparse
import csv
import datetime
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SECTIONS = ("ssd", "gdn", "attention", "decode", "models")
SMALL_MODELS = "transformer-180m,mamba2-180m,gdn-180m,amor-mamba2-180m,amor-gdn-180m"
LARGE_MODELS = "transformer-1.5b,mamba2-1.5b,gdn-1.5b,amor-mamba2-1.5b,amor-gdn-1.5b"
CSV_FIELDS = ["section", "case", "what", "ours", "peer", "peer_value", "unit", "ratio", "note"]


# ---- parsing the children's CSVs (pure; tests/cuda/bench_vs_peers_test.py)

def fnum(s):
    """A float from a CSV cell; None for empty, n/a, nan or junk."""
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if v == v else None


def read_csv_text(text):
    return list(csv.DictReader(io.StringIO(text or "")))


# The extra arguments of each run of our scan benchmarks: the default shape (SSD H64 P64 N128,
# GDN H24 K64 V128), then the peers' second shape (SSD H24, GDN H16 K128 V256).
OUR_SHAPES = {"ssd": [[], ["--heads", "24"]],
              "gdn": [[], ["--heads", "16", "--dk", "128", "--dv", "256"]]}


def parse_bench_ssd(csv_text, stdout_text=""):
    """bench-ssd's CSV (op,shape,median_us,...) -> {(H, P, N, T): {'fwd': us, 'fwdbwd': us}}.
    H, P, N from its header line ('SSD H=64 P=64 N=128'), else bench-ssd's constants 64/64/128;
    an 'H<n>' in a row's shape overrides H (for a bench-ssd that grows more head counts)."""
    m = re.search(r"H=(\d+) P=(\d+) N=(\d+)", stdout_text or "")
    H0, P, N = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (64, 64, 128)
    out = {}
    for r in read_csv_text(csv_text):
        op = (r.get("op") or "").strip()
        what = {"ssd forward": "fwd", "ssd fwd+bwd": "fwdbwd"}.get(op)
        us = fnum(r.get("median_us"))
        if not what or us is None:
            continue
        shape = r.get("shape") or ""
        t = re.search(r"\[\s*\d+\s*,\s*(\d+)\s*\]", shape) or re.search(r"T(\d+)", shape)
        if not t:
            continue
        h = re.search(r"H(\d+)", shape)
        key = (int(h.group(1)) if h else H0, P, N, int(t.group(1)))
        out.setdefault(key, {})[what] = us
    return out


def parse_bench_gdn(csv_text, stdout_text=""):
    """bench-gdn's CSV (what,shape,median_us,...) -> {(H, K, V, T): {'fwd': us, 'fwdbwd': us}}.
    H, K, V from its header ('GDN H24 K64 V128'), else 24/64/128; the shape 'B8 T2048 H24' gives
    T (and H)."""
    m = re.search(r"GDN H(\d+) K(\d+) V(\d+)", stdout_text or "")
    H0, K, V = (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (24, 64, 128)
    out = {}
    for r in read_csv_text(csv_text):
        what = {"gdn fwd": "fwd", "gdn fwd+bwd": "fwdbwd"}.get((r.get("what") or "").strip())
        us = fnum(r.get("median_us"))
        t = re.search(r"T(\d+)", r.get("shape") or "")
        if not what or us is None or not t:
            continue
        h = re.search(r"H(\d+)", r.get("shape") or "")
        out.setdefault((int(h.group(1)) if h else H0, K, V, int(t.group(1))), {})[what] = us
    return out


def parse_peer_kernels(csv_text):
    """peer_kernels.py's CSV -> [{op, peer, B, T, H, dims: (ints), fwd, fwdbwd, note}]."""
    rows = []
    for r in read_csv_text(csv_text):
        try:
            T, H = int(r["T"]), int(r["H"])
        except (KeyError, TypeError, ValueError):
            continue
        rows.append({"op": r.get("op", ""), "peer": r.get("peer", ""), "B": r.get("B", ""),
                     "T": T, "H": H, "dims": tuple(int(x) for x in re.findall(r"\d+",
                                                                               r.get("dims", ""))),
                     "label": r.get("dims", ""), "fwd": fnum(r.get("fwd_us")),
                     "fwdbwd": fnum(r.get("fwdbwd_us")), "note": (r.get("note") or "").strip()})
    return rows


def ratio(peer, ours):
    return peer / ours if peer and ours else None


def kernel_rows(section, ours, peers, peer_name, why_ours_missing="", why_peer_missing=""):
    """Rows of one scan section: every peer case (ops matching the section), with ours at the
    same (H, dims..., T) when bench-ssd/bench-gdn has it, else 'not run'."""
    rows = []
    for p in peers:
        if p["op"] != section:
            continue
        key = p["dims"] + (p["T"],)  # (H, P, N, T) or (H, K, V, T)
        mine = ours.get(key)
        case = "%s T%d (B%s)" % (p["label"], p["T"], p["B"])
        for what, label in (("fwd", "forward"), ("fwdbwd", "fwd+bwd")):
            note = []
            o = mine.get(what) if mine else None
            if mine is None:
                note.append(why_ours_missing or "not run: our bench has no %s case" % p["label"])
            elif o is None:
                note.append("ours: no %s time" % label)
            pv = p[what]
            if pv is None or (what == "fwdbwd" and p["note"]):
                if p["note"]:
                    note.append("%s: %s" % (peer_name, p["note"]))
                elif pv is None:
                    note.append("%s: no time" % peer_name)
            rows.append({"section": section, "case": case, "what": label, "ours": o,
                         "peer": peer_name, "peer_value": pv, "unit": "us",
                         "ratio": ratio(pv, o), "note": "; ".join(note)})
    if not rows and ours:
        for key, v in sorted(ours.items()):
            for what, label in (("fwd", "forward"), ("fwdbwd", "fwd+bwd")):
                rows.append({"section": section, "case": "%s T%d" % (key[:-1], key[-1]),
                             "what": label, "ours": v.get(what), "peer": peer_name,
                             "peer_value": None, "unit": "us", "ratio": None,
                             "note": why_peer_missing or "peer not run"})
    return rows


def attention_rows(ours_text, sdpa_text, sdpa_note="", ours_note=""):
    """bench-attention vs SDPA: dense ours and cuDNN rows against SDPA at the same case; gated22
    rows against SDPA's dense time (a PyTorch AMOR's dense masked attention), with the fraction
    of cuDNN's dense time in the note."""
    ours = read_csv_text(ours_text)
    sdpa = {r.get("case"): r for r in read_csv_text(sdpa_text)}
    if not ours:  # our bench failed: SDPA's times alone, with why
        return [{"section": "attention", "case": name, "what": label, "ours": None,
                 "peer": "SDPA", "peer_value": fnum(s.get(what)), "unit": "us", "ratio": None,
                 "note": ours_note or "ours not run"}
                for name, s in sdpa.items()
                for what, label in (("fwd_us", "forward"), ("fwdbwd_us", "fwd+bwd"))]
    cudnn = {r["case"][:-len(" cudnn")]: r for r in ours if r.get("case", "").endswith(" cudnn")}
    rows = []
    for r in ours:
        name = r.get("case", "")
        gated = name.startswith("gated")
        base = name[:-len(" cudnn")] if name.endswith(" cudnn") else name
        if gated:
            base = re.sub(r"^gated\d*", "dense", name)
        s = sdpa.get(base)
        for what, label in (("fwd_us", "forward"), ("fwdbwd_us", "fwd+bwd")):
            o = fnum(r.get(what))
            pv = fnum(s.get(what)) if s else None
            note = []
            if s is None:
                note.append(sdpa_note or "SDPA has no such case")
            if gated:
                note.append("AMOR gated rows (%s firing) vs SDPA dense" %
                            (r.get("firing") or "?"))
                c = cudnn.get(base)
                cv = fnum(c.get(what)) if c else None
                if cv and o:
                    note.append("%.2fx cuDNN's dense time (target <= 0.35)" % (o / cv))
            ours_label = "cuDNN (amor-run auto)" if name.endswith(" cudnn") else "ours"
            rows.append({"section": "attention", "case": "%s [%s]" % (name, ours_label)
                         if name.endswith(" cudnn") else name, "what": label, "ours": o,
                         "peer": "SDPA", "peer_value": pv, "unit": "us", "ratio": ratio(pv, o),
                         "note": "; ".join(note)})
    return rows


# peer_kernels.py's decode rows: (peer column, the name in our tables), in table order
DECODE_PEERS = [("sdpa-flash", "SDPA flash"), ("sdpa-efficient", "SDPA efficient"),
                ("sdpa-cudnn", "SDPA cuDNN"), ("sdpa-math", "SDPA math")]


def decode_kv_bytes(B, Tk, Hkv, D):
    """K and V bytes of one decode call (bf16), bench-attention's and peer_kernels.py's count."""
    return 2.0 * B * Tk * Hkv * D * 2.0


def parse_bench_decode(csv_text):
    """bench-attention's _decode.csv (case,B,Tk,H,D,mode,fwd_us,kv_gbps) -> {(B, Tk, H, Hkv, D):
    {'auto': us, 'tiles': us, 'auto_gbps': GB/s, ...}}, keys in the CSV's order. The bench's rows
    have H = Hkv (no Hkv column); an Hkv column, where a later bench writes one, is read."""
    out = {}
    for r in read_csv_text(csv_text):
        try:
            H = int(r["H"])
            key = (int(r["B"]), int(r["Tk"]), H, int(r.get("Hkv") or H), int(r["D"]))
        except (KeyError, TypeError, ValueError):
            continue
        mode = (r.get("mode") or "").strip()
        us = fnum(r.get("fwd_us"))
        if not mode or us is None:
            continue
        d = out.setdefault(key, {})
        d[mode] = us
        if fnum(r.get("kv_gbps")) is not None:
            d[mode + "_gbps"] = fnum(r.get("kv_gbps"))
    return out


def decode_peer_key(p):
    """A parsed peer_kernels.py decode row -> (B, Tk, H, Hkv, D); None if its dims lack D."""
    hkv = re.search(r"Hkv(\d+)", p["label"])
    d = re.search(r"\bD(\d+)", p["label"])
    try:
        return (int(p["B"]), p["T"], p["H"], int(hkv.group(1)) if hkv else p["H"],
                int(d.group(1))) if d else None
    except (TypeError, ValueError):
        return None


def decode_case(key):
    return "decode B%d Tk%d H%d Hkv%d D%d" % key


def decode_rows(ours_text, peers, ours_note="", peer_note=""):
    """Our decode rows (auto) against every SDPA backend's row at the same (B, Tk, H, Hkv, D): one
    row per (shape, backend), ratio = the backend's time / ours like every kernel row; each also
    carries 'key', 'tiles' (our tiles-forward us), 'ours_gbps', 'refused' and the two halves of
    its note, 'ours_why' and 'peer_why', for decode_table(). A shape that only one side has, a
    backend with no row (or the whole peer run missing: peer_note), and a refusal are notes."""
    ours = parse_bench_decode(ours_text)
    by = {}
    for p in peers:
        if p["op"] == "decode":
            key = decode_peer_key(p)
            if key:
                by.setdefault(key, {})[p["peer"]] = p
    keys = list(ours) + [k for k in by if k not in ours]
    names = dict(DECODE_PEERS)
    order = [n for n, _ in DECODE_PEERS] + sorted({n for d in by.values() for n in d} - set(names))
    rows = []
    for key in keys:
        mine = ours.get(key, {})
        o = mine.get("auto")
        for peer in order:
            p = by.get(key, {}).get(peer)
            name = names.get(peer, peer)
            ours_why = "" if o is not None else ours_note or (
                "ours: no auto row" if mine else "ours: bench-attention has no such case")
            pv = p["fwd"] if p else None
            if p is None:
                peer_why = peer_note or "%s: no row" % name  # a whole-run failure: one text
            elif p["note"]:
                peer_why = "%s: %s" % (name, p["note"])
            else:
                peer_why = "" if pv is not None else "%s: no time" % name
            rows.append({"section": "decode", "case": decode_case(key), "what": "forward",
                         "ours": o, "peer": name, "peer_value": pv, "unit": "us",
                         "ratio": ratio(pv, o),
                         "note": "; ".join(n for n in (ours_why, peer_why) if n), "key": key,
                         "tiles": mine.get("tiles"), "ours_gbps": mine.get("auto_gbps"),
                         "refused": bool(p and p["note"].startswith("refused")),
                         "ours_why": ours_why, "peer_why": peer_why})
    return rows


def decode_table(rows, markdown_table=False):
    """The decode rows as one line per shape: ours (auto, tiles) us, each backend's us, the best
    backend, ours / best (time: < 1 = ours faster), GB/s of K and V for ours and the best;
    a refusal or a missing time is a numbered footnote under the table. Lines of text."""
    rows = [r for r in rows if r["section"] == "decode" and r.get("key")]
    if not rows:
        return []
    peers = []
    for r in rows:
        if r["peer"] not in peers:
            peers.append(r["peer"])
    notes = []

    def foot(text):
        if text not in notes:
            notes.append(text)
        return "[%d]" % (notes.index(text) + 1)

    head = (["shape", "ours auto us", "ours tiles us"] + ["%s us" % p for p in peers] +
            ["best SDPA", "ours / best (time)", "ours GB/s", "best GB/s"])
    lines = []
    for key in dict.fromkeys(r["key"] for r in rows):
        srows = [r for r in rows if r["key"] == key]
        o = srows[0]["ours"]
        ours_cell = "%.1f" % o if o is not None else "- " + foot(srows[0]["ours_why"])
        tiles = srows[0]["tiles"]
        cells = [decode_case(key)[len("decode "):], ours_cell,
                 "%.1f" % tiles if tiles is not None else "-"]
        best = None
        for name in peers:
            r = next((x for x in srows if x["peer"] == name), None)
            if r is None:
                cells.append("-")
                continue
            if r["peer_value"] is not None:
                cells.append("%.1f" % r["peer_value"] +
                             (" " + foot(r["peer_why"]) if r["peer_why"] else ""))
                if best is None or r["peer_value"] < best["peer_value"]:
                    best = r
            else:
                cells.append(("refused " if r["refused"] else "- ") +
                             foot(r["peer_why"] or name + ": no time"))
        nbytes = decode_kv_bytes(*[key[i] for i in (0, 1, 3, 4)])
        ogb = srows[0]["ours_gbps"] or (nbytes / (o * 1e3) if o else None)
        short = best and (best["peer"][5:] if best["peer"].startswith("SDPA ") else best["peer"])
        cells += [short or "-",
                  "%.2f" % (o / best["peer_value"]) if best and o else "-",
                  "%.0f" % ogb if ogb else "-",
                  "%.0f" % (nbytes / (best["peer_value"] * 1e3)) if best else "-"]
        lines.append(cells)
    if markdown_table:
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        out += ["| " + " | ".join(c.replace("|", "/") for c in cells) + " |" for cells in lines]
    else:
        widths = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
        out = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                         enumerate(zip(cells, widths))) for cells in [head] + lines]
    if notes:
        out.append("")
        out += ["%s[%d] %s" % ("- " if markdown_table else "", i + 1, n)
                for i, n in enumerate(notes)]
    return out


def flops_per_token(params, d, seq, attn_layers):
    return 6.0 * params + 6.0 * seq * d * attn_layers


def model_attn_layers(preset, fire_rate, n_layers):
    if preset.startswith("transformer"):
        return float(n_layers)
    if preset.startswith("amor"):
        return 3.0 * (fire_rate if fire_rate is not None else 1.0)
    return 0.0


def model_rows(ours_text, peers_text, seq=2048):
    """bench_train.csv (ours) and peer_models.py's CSV -> one row per (preset, peer mode):
    ratio = our tokens/s / the peer's; per model FLOP too where the counts differ > 0.5%."""
    ours = {r.get("preset"): r for r in read_csv_text(ours_text)}
    peers = read_csv_text(peers_text)
    rows = []
    for p in peers:
        preset, mode = p.get("preset", ""), p.get("mode", "")
        o = ours.get(preset)
        if o is None and preset.startswith("amor-gdn-"):
            o = ours.get("amor-" + preset[len("amor-gdn-"):])
        ot = fnum(o.get("tokens_per_s")) if o else None
        pt = fnum(p.get("tokens_per_s"))
        note = []
        if o is None:
            note.append("ours not run")
        elif not (o.get("status") or "").startswith("ok"):
            note.append("ours: %s" % o.get("status"))
        elif (o.get("status") or "") != "ok":
            note.append("ours: %s" % o.get("status"))
        if p.get("status") != "ok":
            note.append("peer: %s %s" % (p.get("status", ""), p.get("note", "")))
        elif p.get("note"):
            note.append("peer: %s" % p["note"])
        op, pp = (fnum(o.get("params")) if o else None), fnum(p.get("params"))
        of = fnum(o.get("fire_rate")) if o else None
        pf = fnum(p.get("fire_rate"))
        if of is not None or pf is not None:
            note.append("fire rate ours %s, peer %s" % ("%.3f" % of if of is not None else "-",
                                                       "%.3f" % pf if pf is not None else "-"))
        r = ratio(ot, pt)
        if r and op and pp and abs(op / pp - 1) > 0.005:
            d, L = fnum(p.get("d_model")) or 0, fnum(p.get("n_layers")) or 0
            fo = flops_per_token(op, d, seq, model_attn_layers(preset, of, L))
            fp = flops_per_token(pp, d, seq, model_attn_layers(preset, pf, L))
            note.append("params ours %.1fM, peer %.1fM: per model FLOP %.2fx" %
                        (op / 1e6, pp / 1e6, r * fo / fp))
        extra = []
        if o and fnum(o.get("mfu")) is not None:
            extra.append("our MFU %.3f" % fnum(o.get("mfu")))
        if o and fnum(o.get("peak_gpu_mib")):
            extra.append("peak GiB ours %.1f (nvidia-smi)" % (fnum(o["peak_gpu_mib"]) / 1024))
        if fnum(p.get("peak_gib")):
            extra.append("peer %.1f (reserved)" % fnum(p["peak_gib"]))
        rows.append({"section": "models", "case": preset, "what": "PyTorch " + mode,
                     "ours": ot, "peer": "PyTorch " + mode, "peer_value": pt, "unit": "tok/s",
                     "ratio": r, "note": "; ".join(note + extra)})
    seen = {p.get("preset") for p in peers}
    for name, o in ours.items():
        if name not in seen and not any(s and s.endswith(name[len("amor-"):]) and
                                        s.startswith("amor-gdn-") for s in seen):
            rows.append({"section": "models", "case": name, "what": "-",
                         "ours": fnum(o.get("tokens_per_s")), "peer": "-", "peer_value": None,
                         "unit": "tok/s", "ratio": None, "note": "peer not run"})
    return rows


# ---- output

def fmt(v, unit=""):
    if v is None:
        return "-"
    if unit == "tok/s":
        return "%.0f" % v
    return "%.1f" % v


def fmt_ratio(r):
    return "-" if r is None else "%.2f" % r


def console_table(rows):
    """Every row, one a line; the decode rows as decode_table()'s one line per shape after them."""
    lines = ["%-10s %-34s %-16s %14s %-18s %14s %6s  %s" % (
        "section", "case", "what", "ours", "peer", "peer", "ratio", "note")]
    for r in rows:
        if r["section"] == "decode" and r.get("key"):
            continue
        def val(v):
            return "-" if v is None else fmt(v, r["unit"]) + " " + r["unit"]
        lines.append("%-10s %-34s %-16s %14s %-18s %14s %6s  %s" % (
            r["section"], r["case"][:34], r["what"][:16], val(r["ours"]), r["peer"][:18],
            val(r["peer_value"]), fmt_ratio(r["ratio"]), r["note"]))
    dec = decode_table(rows)
    if dec:
        lines += ["", "decode vs PyTorch SDPA (ours / best: our time over the fastest backend's, "
                  "< 1 = ours faster):"] + dec
    return "\n".join(lines)


def markdown(rows, info):
    out = ["## Ours vs the peers, side by side (`tests/cuda/bench_vs_peers.py`)", ""]
    for k in ("date", "command", "gpu", "versions", "our commit", "peers"):
        if info.get(k):
            out.append("- %s: %s" % (k, info[k]))
    out += ["- ratio: kernels peer time / our time, models our tokens/s / the peer's "
            "(> 1: ours is faster)", ""]
    titles = {"ssd": "SSD (mamba_ssm `mamba_chunk_scan_combined`), 16K tokens per call, bf16",
              "gdn": "Gated delta rule (fla `chunk_gated_delta_rule`), 16K tokens per call, bf16",
              "attention": "Attention vs PyTorch SDPA, causal bf16, 16K tokens per call",
              "decode": "Decode attention vs PyTorch SDPA's backends, one query row per "
                        "sequence, bf16",
              "models": "Whole-model training, seq 2048, bf16, one GPU"}
    for sec in SECTIONS:
        srows = [r for r in rows if r["section"] == sec]
        if not srows:
            continue
        unit = srows[0]["unit"]
        out += ["### " + titles[sec], ""]
        dec = decode_table(srows, markdown_table=True) if sec == "decode" else []
        if dec:
            out += ["ours / best: our time over the fastest SDPA backend's (< 1: ours is faster; "
                    "vs_peers.csv's ratio column is each backend's time / ours, as elsewhere). "
                    "GB/s: the K and V bytes (B Tk Hkv D 2 x 2) over the time. Ours: the median "
                    "of N calls each between CUDA events; SDPA: CUDA-graph replays back to back; "
                    "both rotate over >= 256 MB of K/V so that the cache is not read from L2.", ""]
            out += dec
        elif unit == "tok/s":
            out += ["| model | peer | ours tok/s | peer tok/s | ours / peer | note |",
                    "| --- | --- | --- | --- | --- | --- |"]
            for r in srows:
                out.append("| %s | %s | %s | %s | %s | %s |" % (
                    r["case"], r["peer"], fmt(r["ours"], unit), fmt(r["peer_value"], unit),
                    fmt_ratio(r["ratio"]), r["note"].replace("|", "/")))
        else:
            out += ["| case | pass | ours us | peer | peer us | peer / ours | note |",
                    "| --- | --- | --- | --- | --- | --- | --- |"]
            for r in srows:
                out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    r["case"], r["what"], fmt(r["ours"]), r["peer"], fmt(r["peer_value"]),
                    fmt_ratio(r["ratio"]), r["note"].replace("|", "/")))
        out.append("")
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def csv_text(rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else
                        ("%.4g" % r[k] if isinstance(r.get(k), float) else r[k]))
                    for k in CSV_FIELDS})
    return buf.getvalue()


# ---- running the children

class Runner:
    def __init__(self, work, deadline_s, python):
        self.t0, self.deadline, self.python = time.time(), deadline_s, python
        self.log = open(os.path.join(work, "vs_peers.log"), "w")  # copied to OUT_DIR by flush()
        self.raw = []  # (name, text)

    def elapsed(self):
        return time.time() - self.t0

    def run(self, cmd, timeout, env=None):
        """(rc, output); rc 'timeout' or 'missing' instead of raising."""
        self.log.write("\n$ %s   [t=%.0f s]\n" % (" ".join(shlex.quote(c) for c in cmd),
                                                  self.elapsed()))
        self.log.flush()
        print("[%4.0f s] %s" % (self.elapsed(), " ".join(shlex.quote(os.path.basename(c))
                                                        if i == 0 else shlex.quote(c)
                                                        for i, c in enumerate(cmd[:4]))),
              flush=True)
        rc, out = run_group(cmd, timeout, dict(os.environ, **(env or {})))
        if rc != 0:
            tool = os.path.basename(cmd[1] if cmd[0] == self.python and len(cmd) > 1 else cmd[0])
            print("        %s" % why(rc, out, tool), flush=True)
        self.log.write(out + "\n[rc %s, t=%.0f s]\n" % (rc, self.elapsed()))
        self.log.flush()
        return rc, out

    def keep(self, name, path):
        try:
            with open(path) as f:
                self.raw.append((name, f.read()))
            return self.raw[-1][1]
        except OSError:
            return ""


def run_group(cmd, timeout, env=None):
    """(rc, stdout + stderr) of cmd run in its own process group; on timeout the whole group is
    killed (amor-run under bench_train.py, the per-preset children of peer_models.py and their
    compile workers: nothing is left holding the GPU) and rc is 'timeout'; 'missing' when cmd
    cannot be started."""
    try:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env=env, start_new_session=True)
    except OSError as e:
        return "missing", str(e)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out or ""
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        out, _ = p.communicate()
        return "timeout", (out or "") + "\n(killed after %d s)" % timeout


def why(rc, out, what):
    """A one-line note for a child that gave no usable output."""
    lines = [l.strip() for l in (out or "").splitlines() if l.strip()]
    errs = [l for l in lines if re.search(r"error|Error|failed|cannot|no CUDA", l)]
    tail = (errs or lines or ["no output"])[-1][:200]
    return "%s %s (rc %s): %s" % (what, "timed out" if rc == "timeout" else "failed", rc, tail)


def gather_info(args, py):
    info = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": "`tests/cuda/bench_vs_peers.py %s`" % " ".join(
                shlex.quote(a) for a in sys.argv[1:])}
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        info["gpu"] = r.stdout.strip().splitlines()[0] if r.stdout.strip() else "unknown"
    except (OSError, subprocess.TimeoutExpired):
        info["gpu"] = "unknown (no nvidia-smi)"
    try:
        r = subprocess.run([py, "-c", "import torch, triton; print('torch %s, triton %s, CUDA %s, "
                            "cuDNN %s' % (torch.__version__, triton.__version__, "
                            "torch.version.cuda, torch.backends.cudnn.version()))"],
                           capture_output=True, text=True, timeout=120)
        info["versions"] = r.stdout.strip() or "unknown: " + (r.stderr.strip().splitlines() or
                                                              ["?"])[-1]
    except (OSError, subprocess.TimeoutExpired):
        info["versions"] = "unknown"
    # A snapshot (`git archive` of a commit, with that commit's hash in COMMIT: how the GPU
    # machine gets our tree) is not a git checkout: git would answer for a repository around it.
    commit_file = os.path.join(ROOT, "COMMIT")
    if not os.path.isdir(os.path.join(ROOT, ".git")) and os.path.isfile(commit_file):
        with open(commit_file) as f:
            info["our commit"] = f.read().strip()[:12] + " (snapshot)"
    else:
        try:
            r = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                               capture_output=True, text=True, timeout=30)
            dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain",
                                    "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=30).stdout.strip()
            info["our commit"] = (r.stdout.strip() or "unknown") + (" (with local changes)"
                                                                    if dirty else "")
        except (OSError, subprocess.TimeoutExpired):
            info["our commit"] = "unknown"
    info["peers"] = peers_commits(args.peers)
    return info


def peers_commits(folder):
    """PEERS.txt lines '<module> <owner/repo> <commit>' -> 'mamba_ssm state-spaces/mamba@e9594ce'."""
    try:
        with open(os.path.join(folder, "PEERS.txt")) as f:
            lines = [l.split() for l in f if l.strip() and not l.startswith("#")]
    except OSError:
        return "commits unknown (no PEERS.txt in %s)" % folder
    return ", ".join("%s %s@%s" % (l[0], l[1], l[2][:12]) if len(l) >= 3 else " ".join(l)
                     for l in lines)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("bin_dir", help="the build's bin/ folder")
    ap.add_argument("out_dir")
    ap.add_argument("--peers", required=True, help="folder holding mamba_ssm/, fla/, einops/")
    ap.add_argument("--only", default=",".join(SECTIONS))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--large", action="store_true", help="models: the 1.5B set, not the 180M one")
    ap.add_argument("--presets", help="models: a comma list instead of the 180M / 1.5B set")
    ap.add_argument("--modes", default="eager,compile", help="models: peer modes")
    ap.add_argument("--micro-batch", type=int, default=4, help="models: sequences per step")
    ap.add_argument("--deadline-s", type=float, default=570.0)
    ap.add_argument("--seq", help="ssd, gdn: peer sequence lengths to time (comma list; default all)")
    ap.add_argument("--no-force-fla-bwd", action="store_true")
    ap.add_argument("--peer-kernels-csv", help="ssd, gdn: a peer_kernels.py CSV measured earlier "
                    "in the same call, used instead of running peer_kernels.py")
    ap.add_argument("--python", default=sys.executable,
                    help="the interpreter of the Python children (default: this one)")
    args = ap.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    for s in only:
        if s not in SECTIONS:
            ap.error("--only: %r is not one of %s" % (s, ",".join(SECTIONS)))
    bin_dir, out_dir = os.path.abspath(args.bin_dir), os.path.abspath(args.out_dir)
    args.peers = os.path.abspath(args.peers)
    if not os.path.isdir(args.peers):
        ap.error("--peers %s is not a folder" % args.peers)
    os.makedirs(out_dir, exist_ok=True)
    py = args.python
    work = tempfile.mkdtemp(prefix="vs_peers_")
    run = Runner(work, args.deadline_s, args.python)
    info = gather_info(args, py)
    print("# %s; %s; %s" % (info["gpu"], info["versions"], info["peers"]), flush=True)
    rows = []
    force = ["--no-force-fla-bwd"] if args.no_force_fla_bwd else []

    def flush():
        write_atomic(os.path.join(out_dir, "vs_peers.csv"), csv_text(rows))
        write_atomic(os.path.join(out_dir, "vs_peers.md"), markdown(rows, info))
        write_atomic(os.path.join(out_dir, "raw.txt"),
                     "".join("==> %s <==\n%s\n" % nt for nt in run.raw))
        run.log.flush()
        with open(run.log.name) as f:
            write_atomic(os.path.join(out_dir, "vs_peers.log"), f.read())

    def out_of_time(section):
        if run.elapsed() < args.deadline_s:
            return False
        rows.append({"section": section, "case": "(all)", "what": "-", "ours": None,
                     "peer": "-", "peer_value": None, "unit": "us", "ratio": None,
                     "note": "not run: out of time (%.0f s of --deadline-s %.0f used)" %
                             (run.elapsed(), args.deadline_s)})
        return True

    def remaining(cap):
        return int(max(30, min(cap, args.deadline_s + 25 - run.elapsed())))

    # Ours first (seconds), then the peers (their first call compiles and autotunes Triton
    # kernels: minutes), so that a call cut short by its limit still has our side of each row.
    sections = (("ssd", "bench-ssd", parse_bench_ssd, "mamba_ssm"),
                ("gdn", "bench-gdn", parse_bench_gdn, "fla"))
    ours_scan = {}
    for sec, tool, parse, peer_name in sections:
        if sec not in only or out_of_time(sec):
            continue
        # Our binaries take one head shape a run: the default, then the peers' second shape.
        ours, rc, out = {}, 0, ""
        for i, extra in enumerate(OUR_SHAPES[sec]):
            path = os.path.join(work, "%s%d.csv" % (sec, i))
            cmd = [os.path.join(bin_dir, tool), path, "--reps", str(args.reps)] + (
                ["--only", "scan"] if sec == "gdn" else []) + extra
            rc_i, out_i = run.run(cmd, remaining(240))
            text = run.keep("%s%s.csv" % (tool, "-" + "".join(extra[1::2]) if extra else ""), path)
            got = parse(text, out_i)
            if got or i == 0:
                rc, out = rc_i, out_i
            ours.update(got)
        ours_scan[sec] = (ours, rc, out)

    # The peers' scan kernels: one child for SSD and GDN together (one import, one autotune cache).
    peer_scan = {}
    scans = [s for s in ("ssd", "gdn") if s in ours_scan]
    if scans and args.peer_kernels_csv:
        # measured earlier in the same device call (peer_kernels.py run while our build ran, so
        # that its minutes of Triton compiling overlap the build): read, not rerun
        try:
            with open(args.peer_kernels_csv) as f:
                text = f.read()
        except OSError as e:
            text = ""
            peer_scan = {"rows": [], "why": "--peer-kernels-csv: %s" % e}
        run.raw.append(("peer_kernels.csv (%s)" % args.peer_kernels_csv, text))
        if text:
            peer_scan = {"rows": parse_peer_kernels(text), "why": ""}
    elif scans and not out_of_time("+".join(scans) + " (peers)"):
        path = os.path.join(work, "peer_kernels.csv")
        cmd = [py, os.path.join(HERE, "peer_kernels.py"), path, "--peers", args.peers,
               "--reps", str(args.reps), "--only", ",".join(scans)] + force + (
                   ["--seq", args.seq] if args.seq else [])
        rc, out = run.run(cmd, remaining(420))
        text = run.keep("peer_kernels.csv", path)
        peer_scan = {"rows": parse_peer_kernels(text), "why": "" if text else why(rc, out,
                                                                                 "peer_kernels.py")}

    for sec, tool, parse, peer_name in sections:
        if sec not in ours_scan:
            continue
        ours, rc, out = ours_scan[sec]
        srows = kernel_rows(sec, ours, peer_scan.get("rows", []), peer_name,
                            "" if ours else "not run: " + why(rc, out, tool),
                            peer_scan.get("why", "") or "peer not run")
        if not srows:
            srows = [{"section": sec, "case": "(all)", "what": "-", "ours": None,
                      "peer": peer_name, "peer_value": None, "unit": "us", "ratio": None,
                      "note": "; ".join(n for n in (peer_scan.get("why"),
                                                    "" if ours else why(rc, out, tool)) if n)}]
        rows += srows
        flush()

    if "attention" in only and not out_of_time("attention"):
        po, ps = os.path.join(work, "attention_ours.csv"), os.path.join(work, "attention_sdpa.csv")
        rc, out = run.run([os.path.join(bin_dir, "bench-attention"), po, "--reps",
                           str(args.reps)], remaining(240))
        ours_text = run.keep("bench-attention.csv", po)
        run.keep("bench-attention_decode.csv", os.path.splitext(po)[0] + "_decode.csv")
        rc2, out2 = run.run([py, os.path.join(HERE, "bench_attention_sdpa.py"), ps, "--reps",
                             str(args.reps)], remaining(240))
        sdpa_text = run.keep("attention_sdpa.csv", ps)
        arows = attention_rows(ours_text, sdpa_text,
                               "" if sdpa_text else why(rc2, out2, "bench_attention_sdpa.py"),
                               "" if ours_text else why(rc, out, "bench-attention"))
        if not arows:
            arows = [{"section": "attention", "case": "(all)", "what": "-", "ours": None,
                      "peer": "SDPA", "peer_value": None, "unit": "us", "ratio": None,
                      "note": why(rc, out, "bench-attention")}]
        rows += arows
        flush()

    if "decode" in only and not out_of_time("decode"):
        # Ours: the attention section's bench-attention run wrote the decode rows already (its
        # OUT_decode.csv); else bench-attention --only decode (seconds).
        ours_text, ours_why = "", ""
        try:
            with open(os.path.join(work, "attention_ours_decode.csv")) as f:
                ours_text = f.read()
        except OSError:
            pass
        if not parse_bench_decode(ours_text):
            po = os.path.join(work, "decode_ours.csv")
            rc, out = run.run([os.path.join(bin_dir, "bench-attention"), po, "--reps",
                               str(args.reps), "--only", "decode"], remaining(240))
            ours_text = run.keep("bench-attention_decode.csv",
                                 os.path.join(work, "decode_ours_decode.csv"))
            ours_why = "" if parse_bench_decode(ours_text) else why(
                rc, out, "bench-attention --only decode")
        # The peer: --peer-kernels-csv's decode rows where it has some, else peer_kernels.py
        # --only decode (PyTorch alone: no Triton compile, no --peers).
        peer_rows, peer_why = [], ""
        if args.peer_kernels_csv:
            try:
                with open(args.peer_kernels_csv) as f:
                    peer_rows = [p for p in parse_peer_kernels(f.read()) if p["op"] == "decode"]
            except OSError:
                pass
        if not peer_rows:
            pk = os.path.join(work, "peer_kernels_decode.csv")
            rc2, out2 = run.run([py, os.path.join(HERE, "peer_kernels.py"), pk, "--reps",
                                 str(args.reps), "--only", "decode"], remaining(240))
            peer_rows = parse_peer_kernels(run.keep("peer_kernels_decode.csv", pk))
            peer_why = "" if peer_rows else why(rc2, out2, "peer_kernels.py --only decode")
        drows = decode_rows(ours_text, peer_rows, ours_why, peer_why)
        if not drows:
            drows = [{"section": "decode", "case": "(all)", "what": "-", "ours": None,
                      "peer": "SDPA", "peer_value": None, "unit": "us", "ratio": None,
                      "note": "; ".join(n for n in (ours_why, peer_why) if n) or "no rows"}]
        rows += drows
        flush()

    if "models" in only and not out_of_time("models"):
        presets = args.presets or (LARGE_MODELS if args.large else SMALL_MODELS)
        tdir = os.path.join(work, "train")
        rc, out = run.run([py, os.path.join(HERE, "bench_train.py"), bin_dir, tdir,
                           "--presets=" + presets, "--micro-batch=%d" % args.micro_batch,
                           "--seq-len=2048"], remaining(420))
        ours_text = run.keep("bench_train.csv", os.path.join(tdir, "bench_train.csv"))
        pm = os.path.join(work, "peer_models.csv")
        n = len(presets.split(",")) * len(args.modes.split(","))
        rc2, out2 = run.run([py, os.path.join(HERE, "peer_models.py"), pm, "--peers", args.peers,
                             "--presets", presets, "--modes", args.modes,
                             "--micro-batch", str(args.micro_batch),
                             # at least 180 s a preset: the first one over a peer's scans also
                             # runs its Triton autotuning (mamba2-180m timed out at 76 s once)
                             "--timeout", str(max(180, remaining(600) // max(1, n) * 2))] + force,
                            remaining(600))
        peers_text = run.keep("peer_models.csv", pm)
        run.keep("peer_models.log", os.path.splitext(pm)[0] + ".log")
        mrows = model_rows(ours_text, peers_text)
        if not ours_text:
            mrows.append({"section": "models", "case": "(ours)", "what": "-", "ours": None,
                          "peer": "-", "peer_value": None, "unit": "tok/s", "ratio": None,
                          "note": why(rc, out, "bench_train.py")})
        if not peers_text:
            mrows.append({"section": "models", "case": "(peers)", "what": "-", "ours": None,
                          "peer": "PyTorch", "peer_value": None, "unit": "tok/s", "ratio": None,
                          "note": why(rc2, out2, "peer_models.py")})
        rows += mrows
        flush()

    flush()
    print(console_table(rows))
    print("\nwrote %s/{vs_peers.md, vs_peers.csv, vs_peers.log, raw.txt} in %.0f s" %
          (out_dir, run.elapsed()))
    run.log.close()
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
