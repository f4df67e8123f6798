"""Real PyTorch workers (Debian's python3-torch, gloo) under distrun: init_process_group with no arguments."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_allreduce.py")
STORE_WORKER = os.path.join(os.path.dirname(__file__), "torch_store_worker.py")
# Debian's python3-torch here; a GPU machine's own torch 2.x there (bench/gpu_checks.sh).
PYTHON = os.environ.get("DISTRUN_TEST_PYTHON", "/usr/bin/python3")


def reports(stdout):
    """The store worker's lines, as dicts."""
    out = []
    for line in stdout.splitlines():
        if "rank=" in line:
            words = line.split("] ", 1)[-1].split()
            out.append(dict(w.split("=", 1) for w in words))
    return out


class TorchGloo(unittest.TestCase):
    def test_four_workers_all_reduce(self):
        r = run(["--nproc-per-node", "4", "--", PYTHON, EXAMPLE], timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = [l for l in r.stdout.splitlines() if "all_reduce sum" in l]
        self.assertEqual(len(lines), 4, r.stdout)
        for rank in range(4):
            self.assertTrue(any(l.startswith(f"[{rank}] rank {rank}/4") and l.endswith("OK") for l in lines),
                            r.stdout)


class TorchStore(unittest.TestCase):
    """PyTorch's store served by distrun's runtime (--torch-store distrun, the default)."""

    def test_four_workers_use_distruns_store_and_none_binds_master_port(self):
        r = run(["--nproc-per-node", "4", "--", PYTHON, STORE_WORKER], timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = reports(r.stdout)
        self.assertEqual(sorted(int(g["rank"]) for g in got), [0, 1, 2, 3], r.stdout)
        for g in got:
            self.assertEqual(g["sum"], "10", g)
            self.assertEqual(g["agent_store"], "True", g)
            # The store is the runtime's port, which distrun (not a worker) listens on.
            self.assertEqual(g["store"], g["coordinator"], g)
            self.assertEqual(g["owner"], "other", g)

    def test_a_restart_round_reinitialises_with_a_fresh_store(self):
        r = run(["--nproc-per-node", "3", "--max-restarts", "1", "--", PYTHON, STORE_WORKER],
                env={"FAIL_RANK": "1"}, timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = reports(r.stdout)
        by_epoch = {}
        for g in got:
            by_epoch.setdefault(g["epoch"], []).append(g)
        self.assertEqual(sorted(by_epoch), ["0", "1"], r.stdout)
        self.assertEqual(len(by_epoch["1"]), 3, r.stdout)
        for g in by_epoch["1"]:
            self.assertEqual(g["sum"], "6", g)
            self.assertEqual(g["stale"], "False", g)  # epoch 0's key is gone
            self.assertEqual(g["owner"], "other", g)
        # The same store, on the same port, across the restart.
        self.assertEqual({g["store"] for g in got}, {got[0]["coordinator"]}, r.stdout)
        self.assertIn("restarting all workers (restart 1 of 1", r.stderr)

    def test_rank0_store_is_bound_by_rank_0_as_plain_env_does(self):
        r = run(["--nproc-per-node", "2", "--torch-store", "rank0", "--", PYTHON, STORE_WORKER],
                timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = {int(g["rank"]): g for g in reports(r.stdout)}
        self.assertEqual(sorted(got), [0, 1], r.stdout)
        self.assertEqual(got[0]["owner"], "me", got[0])
        self.assertEqual(got[1]["owner"], "other", got[1])
        self.assertEqual(got[0]["agent_store"], "unset")
        self.assertNotEqual(got[0]["store"], got[0]["coordinator"])

    def test_a_stray_tcpstore_request_closes_that_connection_only(self):
        # Malformed bytes on the store's port, sent by a worker beside a working job: that connection is
        # closed with a warning naming the opcode, and the job finishes.
        script = ("import os, socket, subprocess, sys\n"
                  "if os.environ['RANK'] == '0':\n"
                  "    s = socket.create_connection((os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT'])))\n"
                  "    s.sendall(bytes([3]) + (1 << 40).to_bytes(8, 'little'))\n"
                  "    assert s.recv(1) == b'', 'the connection stays open'\n"
                  "sys.exit(subprocess.call([sys.executable, sys.argv[1]]))\n")
        r = run(["--nproc-per-node", "2", "--", PYTHON, "-c", script, STORE_WORKER], timeout=240)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(len(reports(r.stdout)), 2, r.stdout)
        self.assertIn("closed the TCPStore connection from 127.0.0.1:", r.stderr)
        self.assertIn("tcpstore 1.13 ADD (opcode 3): key of 1099511627776 bytes, over the limit of 8192",
                      r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
