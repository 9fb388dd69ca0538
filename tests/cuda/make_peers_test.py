#!/usr/bin/env python3
"""tests/cuda/make_peers.sh on three small git repositories made here in the layout of the peers'
(no network): the folder holds the Triton ops, utils, fla and einops, the emptied __init__.py
files (fla's keeping its __version__ line), PEERS.txt with each repository's commit, and nothing
else; bad arguments fail with a message and leave no folder behind."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "make_peers.sh")


def git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd,
                          check=True, capture_output=True, text=True).stdout.strip()


def make_repo(root, name, files):
    d = os.path.join(root, name)
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(d, path)), exist_ok=True)
        with open(os.path.join(d, path), "w") as f:
            f.write(text)
    git(root, "init", "-q", d)
    git(d, "add", "-A")
    git(d, "commit", "-qm", "x")
    return os.path.join(d, ".git"), git(d, "rev-parse", "HEAD")


class MakePeers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        t = self.tmp.name
        self.mamba, self.mamba_rev = make_repo(t, "mamba", {
            "mamba_ssm/__init__.py": "from mamba_ssm.modules import *  # needs the CUDA extension\n",
            "mamba_ssm/ops/__init__.py": "import selective_scan_cuda\n",
            "mamba_ssm/ops/triton/ssd_combined.py": "def mamba_chunk_scan_combined(): pass\n",
            "mamba_ssm/utils/torch.py": "x = 1\n",
            "mamba_ssm/modules/mamba2.py": "import causal_conv1d\n",
            "setup.py": "",
        })
        self.fla, self.fla_rev = make_repo(t, "fla", {
            "fla/__init__.py": "from fla.layers import *\n__version__ = \"9.9\"\n",
            "fla/ops/__init__.py": "from .gla import *\n",
            "fla/ops/gated_delta_rule/chunk.py": "def chunk_gated_delta_rule(): pass\n",
            "fla/modules/__init__.py": "from .fused_norm_gate import *\n",
            "fla/utils.py": "from fla import __version__\n",
            "tests/test_x.py": "",
        })
        self.einops, self.einops_rev = make_repo(t, "einops", {"einops/__init__.py": "x = 2\n",
                                                               "docs/a.md": ""})

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        return subprocess.run(["bash", SCRIPT, *args], capture_output=True, text=True)

    def test_folder(self):
        out = os.path.join(self.tmp.name, "peers")
        r = self.run_script(self.mamba, self.fla, self.einops, out)
        self.assertEqual(r.returncode, 0, r.stderr)
        files = sorted(os.path.relpath(os.path.join(d, f), out)
                       for d, _, fs in os.walk(out) for f in fs)
        self.assertEqual(files, sorted([
            "PEERS.txt", "einops/__init__.py", "fla/__init__.py", "fla/modules/__init__.py",
            "fla/ops/__init__.py", "fla/ops/gated_delta_rule/chunk.py", "fla/utils.py",
            "mamba_ssm/__init__.py", "mamba_ssm/ops/__init__.py",
            "mamba_ssm/ops/triton/ssd_combined.py", "mamba_ssm/utils/torch.py"]))
        read = lambda p: open(os.path.join(out, p)).read()
        self.assertEqual(read("fla/__init__.py"), '__version__ = "9.9"\n')
        self.assertEqual(read("fla/ops/__init__.py"), "")
        self.assertEqual(read("fla/modules/__init__.py"), "")
        self.assertEqual(read("mamba_ssm/ops/__init__.py"), "")
        self.assertTrue(read("mamba_ssm/__init__.py").startswith("#"))
        self.assertEqual(read("PEERS.txt").split("\n")[:3], [
            "mamba_ssm state-spaces/mamba " + self.mamba_rev,
            "fla fla-org/flash-linear-attention " + self.fla_rev,
            "einops arogozhnikov/einops " + self.einops_rev])
        # The ops import alone from the folder (nothing of the packages' extensions is needed).
        r = subprocess.run([sys.executable, "-c",
                            "import mamba_ssm.ops.triton.ssd_combined, fla.utils, einops"],
                           cwd=out, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_refusals(self):
        out = os.path.join(self.tmp.name, "peers")
        r = self.run_script(self.mamba, self.fla)
        self.assertEqual(r.returncode, 2)
        r = self.run_script(self.mamba, self.tmp.name, self.einops, out)
        self.assertEqual(r.returncode, 1)
        self.assertIn("is not a git directory", r.stderr)
        self.assertFalse(os.path.exists(out))
        r = self.run_script(self.mamba, self.fla, self.einops, out, "no-such-rev")
        self.assertEqual(r.returncode, 1)
        self.assertFalse(os.path.exists(out))
        leftovers = [n for n in os.listdir(self.tmp.name) if n.startswith(".peers.")]
        self.assertEqual(leftovers, [])


if __name__ == "__main__":
    unittest.main()
