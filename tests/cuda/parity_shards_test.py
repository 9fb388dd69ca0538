#!/usr/bin/env python3
"""tests/cuda/parity_shards.sh against a stand-in cuda_parity_test (a shell script printing
gtest's lines for its filter and environment): shards run with their own switches, the summary
counts passed / failed / skipped tests, a shard cut by its cap shows 124, all-skipped (77) is no
failure, and bad arguments are refused."""
import os
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "parity_shards.sh")

FAKE = r"""#!/bin/bash
f=${1#--gtest_filter=}
case "$f" in
  pass*) echo "[       OK ] CudaParity.A (1 ms)"; echo "[       OK ] CudaParity.B (1 ms)"; exit 0 ;;
  env*) if [ "${AMOR_X:-}" = 1 ] && [ "${AMOR_Y:-}" = 2 ]; then echo "[       OK ] CudaParity.E (1 ms)"; exit 0; fi
        echo "[  FAILED  ] CudaParity.E (1 ms)"; exit 1 ;;
  fail*) echo "[       OK ] CudaParity.A (1 ms)"; echo "[  FAILED  ] CudaParity.C (2 ms)"
         echo "[  FAILED  ] CudaParity.C"; exit 1 ;;
  skip*) echo "[  SKIPPED ] CudaParity.S (0 ms)"; exit 77 ;;
  slow*) sleep 5; exit 0 ;;
esac
exit 3
"""


class ParityShards(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.build = os.path.join(self.tmp.name, "build")
        os.makedirs(os.path.join(self.build, "tests", "cuda"))
        exe = os.path.join(self.build, "tests", "cuda", "cuda_parity_test")
        with open(exe, "w") as f:
            f.write(FAKE)
        os.chmod(exe, 0o755)
        self.out = os.path.join(self.tmp.name, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True)

    def rows(self, stdout):
        return {line.split()[0]: line.split() for line in stdout.strip().split("\n")[1:]}

    def test_summary(self):
        r = self.run_script(self.build, self.out, "2", "p=pass*", "e=AMOR_X=1,AMOR_Y=2:env*",
                            "s=skip*", "c=slow*")
        self.assertEqual(r.returncode, 1, r.stderr)  # the slow shard was cut
        rows = self.rows(r.stdout)
        self.assertEqual(rows["p"][1:5], ["0", "2", "0", "0"])
        self.assertEqual(rows["e"][1:5], ["0", "1", "0", "0"])  # its switches reached it
        self.assertEqual(rows["s"][1:5], ["77", "0", "0", "1"])
        self.assertEqual(rows["c"][1], "124")
        self.assertTrue(os.path.exists(os.path.join(self.out, "p.log")))

    def test_failure_named(self):
        r = self.run_script(self.build, self.out, "20", "p=pass*", "f=fail*", "s=skip*")
        self.assertEqual(r.returncode, 1)
        rows = self.rows(r.stdout)
        self.assertEqual(rows["f"][1:5], ["1", "1", "1", "0"])
        self.assertEqual(rows["f"][6], "CudaParity.C")

    def test_all_good(self):
        r = self.run_script(self.build, self.out, "20", "p=pass*", "s=skip*")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def test_refusals(self):
        self.assertEqual(self.run_script(self.build, self.out, "5").returncode, 2)
        r = self.run_script(self.tmp.name + "/nothing", self.out, "5", "p=pass*")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no cuda_parity_test", r.stderr)
        r = self.run_script(self.build, self.out, "5", "=pass*")
        self.assertEqual(r.returncode, 2)
        self.assertIn("bad shard", r.stderr)


if __name__ == "__main__":
    unittest.main()
