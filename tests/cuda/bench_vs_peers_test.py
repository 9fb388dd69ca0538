#!/usr/bin/env python3
"""bench_vs_peers.py without a GPU: its parsing of every child's CSV and stdout, the rows and
ratios it builds from them (matched shapes, 'not run' where our bench has no such case, the
peer's refusal as a note), and one whole run over stand-in binaries and a stand-in Python (shell
scripts that write the sample CSVs below): the files it leaves and their content. Exits 0 when
every check passes (unittest)."""
import csv
import importlib.util
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_vs_peers as bvp  # noqa: E402

SSD_STDOUT = ("bench-ssd on NVIDIA H200 (132 SMs), median of 10 calls; SSD H=64 P=64 N=128 chunk 64, "
              "attention 32 heads of 64, bf16\n")
SSD_CSV = """op,shape,median_us,tflops,gb_per_s,attention_us,vs_attention
"ssd forward","[8,2048]",1394.500,43.1,0.0,357.9,0.26
"ssd backward","[8,2048]",4015.900,44.9,0.0,1080.8,0.27
"ssd fwd+bwd","[8,2048]",5375.500,44.7,0.0,1422.3,0.26
"attention forward","[8,2048]",357.900,384.0,0.0,n/a,n/a
"ssd forward","[1,16384]",1465.300,41.0,0.0,2076.8,1.42
"ssd fwd+bwd","[1,16384]",5381.700,44.7,0.0,8623.8,1.60
"ssd fwd+bwd f32 simt","[4,4096]",31284.8,7.7,0.0,n/a,n/a
"ssd_step (decode)","[1,1]",17.5,0.0,240.0,n/a,n/a
"""
GDN_STDOUT = "bench-gdn on NVIDIA H200 (132 SMs), median of 10 calls; GDN H24 K64 V128 chunk 64 bf16\n"
GDN_CSV = """what,shape,median_us,tflops,gb_per_s,attn_us,vs_attn
"gdn fwd","B8 T2048 H24",1529.500,27.7,-1.0,361.500,4.23
"gdn bwd","B8 T2048 H24",5115.800,24.0,-1.0,1101.300,4.65
"gdn fwd+bwd","B8 T2048 H24",6647.900,24.9,-1.0,1440.000,4.62
"attn fwd+bwd","B8 T2048 H32",1440.000,334.1,-1.0,-1.000,n/a
"gdn step","B1 H24",12.800,0.0,125.0,-1.000,n/a
"""
PEER_KERNELS_CSV = """op,peer,B,T,H,dims,fwd_us,fwdbwd_us,note
ssd,mamba_ssm,8,2048,64,H64 P64 N128,710.0,2900.0,
ssd,mamba_ssm,1,16384,64,H64 P64 N128,800.0,3100.0,
ssd,mamba_ssm,8,2048,24,H24 P64 N128,400.0,1500.0,
gdn,fla,8,2048,24,H24 K64 V128,660.0,2500.0,backward failed: RuntimeError: Triton >= 3.4.0 and < 3.7.1 on Hopper GPUs produces incorrect results | fwd+bwd timed with the check bypassed (gradients wrong on this Triton; timing only)
gdn,fla,8,2048,16,H16 K128 V256,900.0,,backward failed: RuntimeError: nope
"""
ATT_OURS_CSV = """case,gated,B,T,H,D,firing,fwd_us,bwd_us,fwdbwd_us,fwd_tflops,bwd_tflops,fwdbwd_tflops
dense T2048 H32 D64,0,8,2048,32,64,1.0000,700.00,1800.00,2500.00,1,1,1
dense T2048 H32 D64 cudnn,0,8,2048,32,64,1.0000,360.00,1080.00,1440.00,1,1,1
gated22 T2048 H32 D64,1,8,2048,32,64,0.2201,300.00,700.00,1000.00,1,1,1
dense T4096 H16 D128,0,4,4096,16,128,1.0000,1000.00,3000.00,4000.00,1,1,1
"""
SDPA_CSV = """case,B,T,H,D,fwd_us,fwdbwd_us,bwd_us
dense T2048 H32 D64,8,2048,32,64,380.00,1500.00,1120.00
"""
# bench-attention's _decode.csv: B1 Tk4096 and Tk32768 (auto, tiles); no B8 row
DECODE_OURS_CSV = """case,B,Tk,H,D,mode,fwd_us,kv_gbps
decode B1 Tk4096 H32 D64 auto,1,4096,32,64,auto,20.00,1677.7
decode B1 Tk4096 H32 D64 tiles,1,4096,32,64,tiles,60.00,559.2
decode B1 Tk32768 H32 D64 auto,1,32768,32,64,auto,90.00,2982.6
decode B1 Tk32768 H32 D64 tiles,1,32768,32,64,tiles,400.00,671.1
"""
# peer_kernels.py decode: cuDNN refuses; no math row at Tk32768; a B8 shape ours lacks
CUDNN_NO = ("refused: RuntimeError: No available kernel.  Aborting execution. (UserWarning: "
            "cuDNN attention needs more than one query)")
DECODE_PEER_CSV = """op,peer,B,T,H,dims,fwd_us,fwdbwd_us,note
decode,sdpa-flash,1,4096,32,H32 Hkv32 D64,25.00,,
decode,sdpa-efficient,1,4096,32,H32 Hkv32 D64,30.00,,
decode,sdpa-cudnn,1,4096,32,H32 Hkv32 D64,,,%(no)s
decode,sdpa-math,1,4096,32,H32 Hkv32 D64,80.00,,
decode,sdpa-flash,1,32768,32,H32 Hkv32 D64,120.00,,
decode,sdpa-efficient,1,32768,32,H32 Hkv32 D64,100.00,,
decode,sdpa-cudnn,1,32768,32,H32 Hkv32 D64,,,%(no)s
decode,sdpa-flash,8,4096,32,H32 Hkv32 D64,100.00,,
""" % {"no": CUDNN_NO}
TRAIN_CSV = """fire_rate,flops_per_token,gpu,micro_batch,mfu,model_tflops,params,peak_gpu_mib,peak_tflops,preset,profiled,seq_len,status,tokens_per_s,wall_s
nan,1.0e9,0,4,0.25,200,179920000,30000,800,transformer-180m,0,2048,ok,288000,30
0.221,1.1e9,0,4,0.2,150,184400000,40000,800,amor-mamba2-180m,0,2048,ok,130000,40
,,0,4,,,,1000,800,gdn-180m,0,2048,failed: amor-run: boom,,10
"""
PEER_MODELS_CSV = """preset,mode,params,d_model,n_layers,d_ff,seq_len,micro_batch,tokens_per_s,step_ms,peak_gib,fire_rate,status,note
transformer-180m,eager,179915520,768,12,1920,2048,4,185000,44.3,20.5,,ok,warm-up 5 s
transformer-180m,compile,179915520,768,12,1920,2048,4,385000,21.3,15.0,,ok,warm-up 50 s
amor-mamba2-180m,compile,182000000,768,12,1216,2048,4,88800,92.2,25.0,0.2199,ok,warm-up 60 s
gdn-180m,eager,180193752,768,12,1408,2048,4,,,,,failed,rc 1: RuntimeError: Triton >= 3.4.0 and < 3.7.1
"""


class Parsing(unittest.TestCase):
    def test_ssd(self):
        ours = bvp.parse_bench_ssd(SSD_CSV, SSD_STDOUT)
        self.assertEqual(ours[(64, 64, 128, 2048)], {"fwd": 1394.5, "fwdbwd": 5375.5})
        self.assertEqual(ours[(64, 64, 128, 16384)]["fwdbwd"], 5381.7)
        self.assertEqual(len(ours), 2)  # f32 / decode / attention rows ignored
        # the header's H wins over the default; a shape's H over the header
        self.assertIn((32, 64, 128, 2048), bvp.parse_bench_ssd(SSD_CSV, "SSD H=32 P=64 N=128"))
        h24 = SSD_CSV.replace('"[8,2048]"', '"[8,2048] H24"')
        self.assertIn((24, 64, 128, 2048), bvp.parse_bench_ssd(h24, SSD_STDOUT))
        self.assertEqual(bvp.parse_bench_ssd("", ""), {})

    def test_gdn(self):
        ours = bvp.parse_bench_gdn(GDN_CSV, GDN_STDOUT)
        self.assertEqual(ours, {(24, 64, 128, 2048): {"fwd": 1529.5, "fwdbwd": 6647.9}})

    def test_peer_kernels(self):
        rows = bvp.parse_peer_kernels(PEER_KERNELS_CSV)
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[0]["dims"], (64, 64, 128))
        self.assertIsNone(rows[4]["fwdbwd"])
        self.assertIn("3.7.1", rows[3]["note"])

    def test_fnum(self):
        for bad in ("", "n/a", "nan", None, "x"):
            self.assertIsNone(bvp.fnum(bad))
        self.assertEqual(bvp.fnum("2.5"), 2.5)


class Rows(unittest.TestCase):
    def test_ssd_rows(self):
        rows = bvp.kernel_rows("ssd", bvp.parse_bench_ssd(SSD_CSV, SSD_STDOUT),
                               bvp.parse_peer_kernels(PEER_KERNELS_CSV), "mamba_ssm")
        self.assertEqual(len(rows), 6)  # 3 peer cases x (fwd, fwd+bwd)
        r = rows[1]
        self.assertEqual((r["what"], r["ours"], r["peer_value"]), ("fwd+bwd", 5375.5, 2900.0))
        self.assertAlmostEqual(r["ratio"], 2900.0 / 5375.5)
        h24 = [r for r in rows if "H24" in r["case"]]
        self.assertTrue(all(r["ours"] is None and r["ratio"] is None and "not run" in r["note"]
                            for r in h24))

    def test_gdn_rows_refusal_note(self):
        rows = bvp.kernel_rows("gdn", bvp.parse_bench_gdn(GDN_CSV, GDN_STDOUT),
                               bvp.parse_peer_kernels(PEER_KERNELS_CSV), "fla")
        fb = [r for r in rows if r["what"] == "fwd+bwd" and "H24" in r["case"]][0]
        self.assertIn("3.7.1", fb["note"])
        self.assertIn("timing only", fb["note"])
        self.assertAlmostEqual(fb["ratio"], 2500.0 / 6647.9)
        fwd = [r for r in rows if r["what"] == "forward" and "H24" in r["case"]][0]
        self.assertEqual(fwd["note"], "")  # the backward's refusal is not the forward's
        h16 = [r for r in rows if "H16" in r["case"]]
        self.assertTrue(all("not run" in r["note"] for r in h16))
        self.assertIn("nope", h16[1]["note"])

    def test_peer_missing(self):
        rows = bvp.kernel_rows("ssd", bvp.parse_bench_ssd(SSD_CSV, SSD_STDOUT), [], "mamba_ssm")
        self.assertEqual(len(rows), 4)
        self.assertTrue(all(r["note"] == "peer not run" for r in rows))

    def test_attention(self):
        rows = bvp.attention_rows(ATT_OURS_CSV, SDPA_CSV)
        by = {(r["case"], r["what"]): r for r in rows}
        self.assertAlmostEqual(by[("dense T2048 H32 D64", "forward")]["ratio"], 380.0 / 700.0)
        cud = by[("dense T2048 H32 D64 cudnn [cuDNN (amor-run auto)]", "fwd+bwd")]
        self.assertAlmostEqual(cud["ratio"], 1500.0 / 1440.0)
        g = by[("gated22 T2048 H32 D64", "fwd+bwd")]
        self.assertAlmostEqual(g["ratio"], 1500.0 / 1000.0)
        self.assertIn("0.69x cuDNN's dense time", g["note"])
        self.assertIn("SDPA has no such case", by[("dense T4096 H16 D128", "forward")]["note"])

    def test_decode_parse(self):
        ours = bvp.parse_bench_decode(DECODE_OURS_CSV)
        self.assertEqual(list(ours), [(1, 4096, 32, 32, 64), (1, 32768, 32, 32, 64)])
        self.assertEqual(ours[(1, 4096, 32, 32, 64)]["auto"], 20.0)
        self.assertEqual(ours[(1, 4096, 32, 32, 64)]["tiles"], 60.0)
        self.assertEqual(ours[(1, 32768, 32, 32, 64)]["auto_gbps"], 2982.6)
        # the bytes count agrees with the bench's own GB/s column
        self.assertAlmostEqual(bvp.decode_kv_bytes(1, 32768, 32, 64) / 90.0 / 1e3, 2982.6, 1)
        self.assertEqual(bvp.parse_bench_decode(""), {})
        peers = [p for p in bvp.parse_peer_kernels(DECODE_PEER_CSV) if p["op"] == "decode"]
        self.assertEqual(len(peers), 8)
        self.assertEqual(bvp.decode_peer_key(peers[0]), (1, 4096, 32, 32, 64))
        self.assertTrue(peers[2]["note"].startswith("refused"))  # the comma-free note survives

    def test_decode_rows(self):
        rows = bvp.decode_rows(DECODE_OURS_CSV, bvp.parse_peer_kernels(DECODE_PEER_CSV))
        self.assertEqual(len(rows), 3 * 4)  # 3 shapes x 4 backends, in the backends' order
        by = {(r["case"], r["peer"]): r for r in rows}
        c = "decode B1 Tk4096 H32 Hkv32 D64"
        # matching: each backend's time / ours, as every kernel row
        self.assertAlmostEqual(by[(c, "SDPA flash")]["ratio"], 25.0 / 20.0)
        self.assertAlmostEqual(by[(c, "SDPA math")]["ratio"], 80.0 / 20.0)
        self.assertEqual(by[(c, "SDPA flash")]["note"], "")
        # a refused backend: no time, no ratio, its error line in the note
        r = by[(c, "SDPA cuDNN")]
        self.assertIsNone(r["peer_value"])
        self.assertIsNone(r["ratio"])
        self.assertTrue(r["refused"])
        self.assertIn("SDPA cuDNN: refused: RuntimeError: No available kernel", r["note"])
        # a missing peer row
        m = by[("decode B1 Tk32768 H32 Hkv32 D64", "SDPA math")]
        self.assertEqual((m["ours"], m["peer_value"], m["note"]), (90.0, None, "SDPA math: no row"))
        self.assertFalse(m["refused"])
        # a shape only the peer has: ours missing, said so
        b8 = [r for r in rows if r["case"].startswith("decode B8")]
        self.assertEqual(len(b8), 4)
        self.assertTrue(all(r["ours"] is None and r["ratio"] is None and
                            "ours: bench-attention has no such case" in r["note"] for r in b8))
        self.assertEqual(b8[0]["peer_value"], 100.0)
        self.assertIn("SDPA efficient: no row", b8[1]["note"])

    def test_decode_table(self):
        rows = bvp.decode_rows(DECODE_OURS_CSV, bvp.parse_peer_kernels(DECODE_PEER_CSV))
        lines = bvp.decode_table(rows)
        head = lines[0].split()
        self.assertEqual(head[:3], ["shape", "ours", "auto"])
        text = "\n".join(lines)
        b1 = [l for l in lines if l.startswith("B1 Tk4096 ")][0].split()
        # shape(5 words), ours auto, tiles, flash, efficient, cuDNN 'refused [1]', math,
        # best, ours / best, ours GB/s, best GB/s
        self.assertEqual(b1[5:], ["20.0", "60.0", "25.0", "30.0", "refused", "[1]", "80.0",
                                  "flash", "0.80", "1678", "1342"])
        t32 = [l for l in lines if l.startswith("B1 Tk32768 ")][0].split()
        self.assertEqual(t32[5:], ["90.0", "400.0", "120.0", "100.0", "refused", "[1]", "-",
                                   "[2]", "efficient", "0.90", "2983", "2684"])
        b8 = [l for l in lines if l.startswith("B8 Tk4096 ")][0].split()
        self.assertEqual(b8[5:8], ["-", "[3]", "-"])  # ours missing, no tiles
        self.assertEqual(b8[-4:], ["flash", "-", "-", "2684"])  # no ratio without ours
        self.assertIn("[1] SDPA cuDNN: refused: RuntimeError: No available kernel", text)
        self.assertIn("[2] SDPA math: no row", text)
        self.assertIn("[3] ours: bench-attention has no such case", text)
        self.assertEqual(sum(l.startswith("[1] ") for l in lines), 1)  # one footnote, 2 refusals
        self.assertEqual(text.count("refused [1]"), 2)
        md = bvp.decode_table(rows, markdown_table=True)
        self.assertTrue(md[0].startswith("| shape | ours auto us | ours tiles us | SDPA flash us"))
        self.assertIn("| B1 Tk4096 H32 Hkv32 D64 | 20.0 | 60.0 | 25.0 | 30.0 | refused [1] | 80.0 "
                      "| flash | 0.80 | 1678 | 1342 |", md)
        self.assertIn("- [2] SDPA math: no row", md)

    def test_decode_peer_not_run(self):
        rows = bvp.decode_rows(DECODE_OURS_CSV, [], "",
                               "peer_kernels.py failed (rc 2): no CUDA GPU")
        self.assertEqual(len(rows), 2 * 4)
        self.assertTrue(all(r["ours"] and r["peer_value"] is None and
                            "no CUDA GPU" in r["note"] for r in rows))
        lines = bvp.decode_table(rows)
        self.assertIn("-", lines[1].split())
        # one footnote for the whole peer run, not one per backend
        self.assertEqual([l for l in lines if l.startswith("[")],
                         ["[1] peer_kernels.py failed (rc 2): no CUDA GPU"])
        self.assertEqual(lines[1].count("- [1]"), 4)
        # ours failed, the peer ran: the peer's times kept, our failure in every note
        rows = bvp.decode_rows("", bvp.parse_peer_kernels(DECODE_PEER_CSV), "bench-attention boom")
        self.assertEqual(len(rows), 3 * 4)
        self.assertTrue(all(r["ours"] is None and "bench-attention boom" in r["note"]
                            for r in rows))
        self.assertEqual(bvp.decode_rows("", []), [])

    def test_models(self):
        rows = bvp.model_rows(TRAIN_CSV, PEER_MODELS_CSV)
        by = {(r["case"], r["what"]): r for r in rows}
        t = by[("transformer-180m", "PyTorch compile")]
        self.assertAlmostEqual(t["ratio"], 288000 / 385000.0)
        self.assertNotIn("per model FLOP", t["note"])  # 179.92M vs 179.92M
        a = by[("amor-mamba2-180m", "PyTorch compile")]
        self.assertAlmostEqual(a["ratio"], 130000 / 88800.0)
        self.assertIn("per model FLOP", a["note"])  # 184.4M vs 182.0M
        self.assertIn("fire rate ours 0.221, peer 0.220", a["note"])
        g = by[("gdn-180m", "PyTorch eager")]
        self.assertIsNone(g["ratio"])
        self.assertIn("boom", g["note"])
        self.assertIn("3.7.1", g["note"])

    def test_outputs(self):
        rows = bvp.model_rows(TRAIN_CSV, PEER_MODELS_CSV) + bvp.attention_rows(ATT_OURS_CSV,
                                                                              SDPA_CSV)
        drows = bvp.decode_rows(DECODE_OURS_CSV, bvp.parse_peer_kernels(DECODE_PEER_CSV))
        rows += drows
        md = bvp.markdown(rows, {"date": "today", "gpu": "H200"})
        self.assertIn("| transformer-180m | PyTorch compile | 288000 | 385000 | 0.75 |", md)
        self.assertIn("### Attention vs PyTorch SDPA", md)
        self.assertIn("### Decode attention vs PyTorch SDPA's backends", md)
        self.assertIn("| B1 Tk32768 H32 Hkv32 D64 | 90.0 | 400.0 |", md)
        back = list(csv.DictReader(bvp.csv_text(rows).splitlines()))
        self.assertEqual(len(back), len(rows))
        dec = [r for r in back if r["section"] == "decode"]
        self.assertEqual(len(dec), len(drows))
        self.assertEqual((dec[0]["ours"], dec[0]["peer"], dec[0]["peer_value"], dec[0]["ratio"]),
                         ("20", "SDPA flash", "25", "1.25"))
        con = bvp.console_table(rows)
        self.assertIn("ratio", con.splitlines()[0])
        # the decode rows appear once per shape in the wide table, not one a line per backend
        self.assertNotIn("\ndecode     decode B", con)
        self.assertIn("decode vs PyTorch SDPA", con)
        self.assertEqual(sum(l.startswith("B1 Tk4096 ") for l in con.splitlines()), 1)


FAKE_BIN = {
    # bench-ssd answers --heads H (args: OUT --reps N --heads H) with that H in its header
    "bench-ssd": "h=64; [ \"$4\" = --heads ] && h=$5; printf '%s' \"$SSD_STDOUT\" | "
                 "sed \"s/H=64/H=$h/\"; printf '%s' \"$SSD_CSV\" > \"$1\"",
    "bench-gdn": "printf '%s' \"$GDN_STDOUT\"; printf '%s' \"$GDN_CSV\" > \"$1\"",
    # bench-attention (args: OUT --reps N [--only decode]: $5): with ATT_OK set, every row; else
    # only its decode rows (--only decode), and the full run fails as without a GPU
    "bench-attention": "if [ -n \"$ATT_OK\" ]; then printf '%s' \"$ATT_OURS_CSV\" > \"$1\"; "
                       "printf '%s' \"$DECODE_OURS_CSV\" > \"${1%.csv}_decode.csv\"; exit 0; fi; "
                       "if [ \"$5\" = decode ]; then printf '%s' \"$DECODE_OURS_CSV\" > "
                       "\"${1%.csv}_decode.csv\"; exit 0; fi; "
                       "echo 'bench-attention: no CUDA GPU on this machine' >&2; exit 1",
}
# The stand-in Python: what each child script would write, by the script's name.
FAKE_PY = r"""#!/bin/sh
case "$(basename -- "$1")" in
  peer_kernels.py) case " $* " in
                     *" --only decode "*) printf '%s' "$DECODE_PEER_CSV" > "$2" ;;
                     *) printf '%s' "$PEER_KERNELS_CSV" > "$2" ;;
                   esac ;;
  bench_attention_sdpa.py) printf '%s' "$SDPA_CSV" > "$2" ;;
  bench_train.py) mkdir -p "$3"; printf '%s' "$TRAIN_CSV" > "$3/bench_train.csv" ;;
  peer_models.py) printf '%s' "$PEER_MODELS_CSV" > "$2"; echo log > "${2%.csv}.log" ;;
  -c) echo "torch 9.9, triton 9.9" ;;
  *) echo "unexpected $*" >&2; exit 3 ;;
esac
"""


class PeerKernelsDecode(unittest.TestCase):
    """peer_kernels.py's decode group without a GPU: its shapes are bench-attention's, and its
    --dry-run builds every case's inputs on the CPU (under a Python with torch)."""

    def test_shapes_match_bench_attention(self):
        import peer_kernels
        with open(os.path.join(HERE, "bench_attention_main.cpp")) as f:
            src = f.read()
        body = src[src.index("void run_decode_rows("):]
        body = body[:body.index("\n}\n")]
        Bs = [int(x) for x in re.search(r"int64_t B : \{([^}]*)\}", body).group(1).split(",")]
        Tks = [int(x) for x in re.search(r"int64_t Tk : \{([^}]*)\}", body).group(1).split(",")]
        hd = re.search(r"constexpr int64_t H = (\d+), D = (\d+);", src)
        H, D = int(hd.group(1)), int(hd.group(2))
        self.assertEqual(sorted(peer_kernels.DECODE_CASES),
                         sorted((B, Tk, H, H, D) for B in Bs for Tk in Tks))
        # the same L2-defeating rotation as run_decode: >= 256 MB of K/V, at most 8 sets
        self.assertEqual(peer_kernels.decode_sets(1, 4096, 32, 64), 8)
        self.assertEqual(peer_kernels.decode_sets(1, 16384, 32, 64), 2)
        self.assertEqual(peer_kernels.decode_sets(8, 131072, 32, 64), 1)
        self.assertEqual([n for n, _ in peer_kernels.SDPA_BACKENDS],
                         [n for n, _ in bvp.DECODE_PEERS])

    def test_dry_run(self):
        if importlib.util.find_spec("torch") is None:
            self.skipTest("no torch in %s" % sys.executable)
        tmp = tempfile.mkdtemp(prefix="pk_test_")
        try:
            out = os.path.join(tmp, "pk.csv")
            r = subprocess.run([sys.executable, os.path.join(HERE, "peer_kernels.py"), out,
                                "--dry-run", "--only", "decode"], capture_output=True, text=True,
                               timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(r.stdout.count("inputs ok"), 12, r.stdout)
            self.assertNotIn("WRONG", r.stdout)
            self.assertFalse(os.path.exists(out))  # a dry run writes nothing
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_dry_run_heads(self):
        """--heads keeps the ssd and gdn cases of those H (fla's K 128 shape alone), and a head
        count no case has is refused with the ones there are."""
        if importlib.util.find_spec("torch") is None:
            self.skipTest("no torch in %s" % sys.executable)
        script = os.path.join(HERE, "peer_kernels.py")
        r = subprocess.run([sys.executable, script, "x.csv", "--dry-run", "--only", "gdn",
                            "--heads", "16"], capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        planned = [l for l in r.stdout.splitlines() if l.startswith("gdn ")]
        self.assertEqual(len(planned), 2, r.stdout)
        self.assertTrue(all("H16 K128 V256" in l for l in planned), r.stdout)
        r = subprocess.run([sys.executable, script, "x.csv", "--dry-run", "--only", "ssd,gdn",
                            "--heads", "24", "--seq", "2048"], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        planned = [l.split()[0] for l in r.stdout.splitlines() if l.startswith(("ssd ", "gdn "))]
        self.assertEqual(planned, ["ssd", "gdn"], r.stdout)
        for bad, says in (("32", "no ssd or gdn case has those heads (ssd: 24,64; gdn: 16,24)"),
                          ("x", "'x' is not a head count")):
            r = subprocess.run([sys.executable, script, "x.csv", "--dry-run", "--heads", bad],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(says, r.stderr)

    def test_decode_rows_mocked(self):
        """decode_rows' own logic on the CPU, SDPA and its backend switch stood in for: each
        backend called alone on every set, the time per SDPA call = the timed call's / sets, a
        refusal's error line and first real reason (not the 'because:' line) in the note, and
        enable_gqa only where Hkv < H."""
        if importlib.util.find_spec("torch") is None:
            self.skipTest("no torch in %s" % sys.executable)
        import contextlib
        import enum
        import types
        import warnings
        from unittest import mock
        import torch
        import peer_kernels as pk

        class SDPBackend(enum.Enum):
            MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION = range(4)
        active, calls = [None], []

        @contextlib.contextmanager
        def sdpa_kernel(backend):
            old, active[0] = active[0], backend
            try:
                yield
            finally:
                active[0] = old

        def sdpa(q, k, v, is_causal=False, **kw):
            calls.append((active[0], id(k), is_causal, kw))
            if active[0] == SDPBackend.CUDNN_ATTENTION:
                warnings.warn("cuDNN attention kernel not used because:")
                warnings.warn("cuDNN wants more than one query\n(details)")
                raise RuntimeError("No available kernel. Aborting execution.\nsecond line")
            return pk.decode_reference(torch, q, k, v)

        def timed(torch_, fn, reps):  # 7 us per SDPA call the timed call makes
            n = len(calls)
            fn()
            return 7.0 * (len(calls) - n)

        def inputs(torch_, B, Tk, H, Hkv, D, sets, gen):  # the real builder, at Tk 16 on the CPU
            return pk_inputs(torch_, B, 16, H, Hkv, D, sets, torch.Generator().manual_seed(0),
                             device="cpu")
        pk_inputs = pk.decode_inputs
        attention = types.ModuleType("torch.nn.attention")
        attention.SDPBackend, attention.sdpa_kernel = SDPBackend, sdpa_kernel
        with mock.patch.dict(sys.modules, {"torch.nn.attention": attention}), \
                mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", sdpa,
                                  create=True), \
                mock.patch.object(torch.cuda, "synchronize", lambda: None), \
                mock.patch.object(torch.cuda, "empty_cache", lambda: None), \
                mock.patch.object(pk, "time_us", timed), \
                mock.patch.object(pk, "decode_inputs", inputs), \
                contextlib.redirect_stdout(io.StringIO()):
            rows = pk.decode_rows(torch, (1, 4096, 32, 32, 64), "H32 Hkv32 D64", 5, None)
            mha_calls = list(calls)
            gqa = pk.decode_rows(torch, (1, 4096, 32, 8, 64), "H32 Hkv8 D64", 5, None)
        self.assertEqual([r[1] for r in rows], ["sdpa-flash", "sdpa-efficient", "sdpa-cudnn",
                                                "sdpa-math"])
        self.assertEqual([r[6] for r in rows], ["7.00", "7.00", "", "7.00"])
        self.assertEqual(rows[2][8], "refused: RuntimeError: No available kernel. Aborting "
                         "execution. (UserWarning: cuDNN wants more than one query)")
        # 8 sets at B1 Tk4K: the flash timed call touched 8 distinct K tensors, none causal
        flash = [c for c in mha_calls if c[0] == SDPBackend.FLASH_ATTENTION]
        self.assertEqual(len({c[1] for c in flash}), 8)
        self.assertTrue(all(c[2] is False and c[3] == {} for c in mha_calls))
        self.assertEqual(calls[-1][3], {"enable_gqa": True})
        self.assertEqual(gqa[0][5], "H32 Hkv8 D64")

    def test_arguments(self):
        pk = os.path.join(HERE, "peer_kernels.py")
        r = subprocess.run([sys.executable, pk, "x.csv", "--only", "decode,nope"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("'nope' is not one of ssd,gdn,decode", r.stderr)
        r = subprocess.run([sys.executable, pk, "x.csv", "--only", "ssd"], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--peers DIR is needed", r.stderr)


class WholeRun(unittest.TestCase):
    def test_run(self):
        tmp = tempfile.mkdtemp(prefix="bvp_test_")
        try:
            bin_dir, peers, out = (os.path.join(tmp, n) for n in ("bin", "peers", "out"))
            os.makedirs(bin_dir)
            os.makedirs(peers)
            with open(os.path.join(peers, "PEERS.txt"), "w") as f:
                f.write("# x\nmamba_ssm state-spaces/mamba e9594ce1c732d97440f0332fdc43170a2294dbfa\n")
            for name, body in FAKE_BIN.items():
                self._script(os.path.join(bin_dir, name), "#!/bin/sh\n" + body + "\n")
            py = os.path.join(tmp, "python")
            self._script(py, FAKE_PY)
            env = dict(os.environ, SSD_STDOUT=SSD_STDOUT, SSD_CSV=SSD_CSV, GDN_STDOUT=GDN_STDOUT,
                       GDN_CSV=GDN_CSV, PEER_KERNELS_CSV=PEER_KERNELS_CSV, SDPA_CSV=SDPA_CSV,
                       TRAIN_CSV=TRAIN_CSV, PEER_MODELS_CSV=PEER_MODELS_CSV,
                       DECODE_OURS_CSV=DECODE_OURS_CSV, DECODE_PEER_CSV=DECODE_PEER_CSV,
                       ATT_OURS_CSV=ATT_OURS_CSV)
            env.pop("ATT_OK", None)
            script = os.path.join(HERE, "bench_vs_peers.py")
            r = subprocess.run([sys.executable, script, bin_dir,
                                out, "--peers", peers, "--python", py], env=env,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(os.listdir(out)),
                             ["raw.txt", "vs_peers.csv", "vs_peers.log", "vs_peers.md"])
            with open(os.path.join(out, "vs_peers.md")) as f:
                md = f.read()
            self.assertIn("mamba_ssm state-spaces/mamba@e9594ce1c732", md)
            self.assertIn("torch 9.9, triton 9.9", md)
            self.assertIn("bench-attention failed (rc 1): bench-attention: no CUDA GPU", md)
            with open(os.path.join(out, "vs_peers.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual({r["section"] for r in rows},
                             {"ssd", "gdn", "attention", "decode", "models"})
            self.assertIn("transformer-180m", r.stdout)
            with open(os.path.join(out, "raw.txt")) as f:
                self.assertIn("==> peer_kernels.csv <==", f.read())
            h24 = [r for r in rows if r["section"] == "ssd" and "H24" in r["case"]]
            self.assertTrue(h24 and all(r["ours"] for r in h24), h24)  # bench-ssd --heads 24
            att = [r for r in rows if r["section"] == "attention"]
            self.assertEqual(att[0]["peer_value"], "380")  # SDPA's time kept, ours failed
            # decode: the full bench-attention failed, so --only decode ran; the scan peers' child
            # was asked for ssd,gdn only and the decode peers had their own child
            dec = [r for r in rows if r["section"] == "decode"]
            self.assertEqual(len(dec), 12)
            self.assertEqual((dec[0]["ours"], dec[0]["peer_value"]), ("20", "25"))
            with open(os.path.join(out, "vs_peers.log")) as f:
                log = f.read()
            self.assertIn("--only decode", log)
            self.assertIn("--only ssd,gdn", log)
            self.assertEqual(log.count("peer_kernels.py"), 2)
            self.assertIn("B1 Tk4096 H32 Hkv32 D64", r.stdout)
            self.assertIn("| B1 Tk4096 H32 Hkv32 D64 | 20.0 | 60.0 | 25.0 |", md)
            # attention and decode: the attention run's decode rows are reused (bench-attention
            # runs once, without --only decode)
            env2 = dict(env, ATT_OK="1")
            r = subprocess.run([sys.executable, script, bin_dir, out, "--peers", peers,
                                "--python", py, "--only", "attention,decode"], env=env2,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(out, "vs_peers.log")) as f:
                log = f.read()
            self.assertEqual(log.count("/bench-attention "), 1, log)
            self.assertNotIn("bench-attention decode_ours.csv", log)
            with open(os.path.join(out, "vs_peers.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual({r["section"] for r in rows}, {"attention", "decode"})
            self.assertEqual([r["ours"] for r in rows if r["section"] == "decode"][:4],
                             ["20"] * 4)
            with open(os.path.join(out, "raw.txt")) as f:
                self.assertIn("==> bench-attention_decode.csv <==", f.read())
            # --peer-kernels-csv with decode rows: read, no peer_kernels.py child
            pk = os.path.join(tmp, "pk.csv")
            with open(pk, "w") as f:
                f.write(DECODE_PEER_CSV.replace("25.00", "24.00"))
            r = subprocess.run([sys.executable, script, bin_dir, out, "--peers", peers,
                                "--python", py, "--only", "decode", "--peer-kernels-csv", pk],
                               env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            with open(os.path.join(out, "vs_peers.log")) as f:
                log = f.read()
            self.assertNotIn("peer_kernels.py", log)
            self.assertIn("--only decode", log)  # ours: bench-attention --only decode
            with open(os.path.join(out, "vs_peers.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual((rows[0]["ours"], rows[0]["peer_value"]), ("20", "24"))
            # --only and a bad --only
            r = subprocess.run([sys.executable, script, bin_dir,
                                out, "--peers", peers, "--python", py, "--only", "nope"],
                               env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2)
            self.assertIn("--only", r.stderr)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def _script(path, text):
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    def test_help(self):
        r = subprocess.run([sys.executable, os.path.join(HERE, "bench_vs_peers.py"), "--help"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0)
        self.assertIn("--only", r.stdout)


if __name__ == "__main__":
    unittest.main()
