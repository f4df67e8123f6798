"""Real PyTorch workers (Debian's python3-torch, gloo) under distrun: init_process_group with no arguments."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_allreduce.py")


class TorchGloo(unittest.TestCase):
    def test_four_workers_all_reduce(self):
        r = run(["--nproc-per-node", "4", "--", "/usr/bin/python3", EXAMPLE], timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = [l for l in r.stdout.splitlines() if "all_reduce sum" in l]
        self.assertEqual(len(lines), 4, r.stdout)
        for rank in range(4):
            self.assertTrue(any(l.startswith(f"[{rank}] rank {rank}/4") and l.endswith("OK") for l in lines),
                            r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
