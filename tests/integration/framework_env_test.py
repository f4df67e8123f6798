"""What JAX, Keras and PyTorch would read under distrun is consistent across every worker."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, run  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "framework_env_check.py")


class FrameworkEnv(unittest.TestCase):
    def workers(self, *args):
        r = run([*args, "--tag-output", "off", "--", "/usr/bin/python3", SCRIPT], timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        return [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]

    def test_per_node_workers_agree(self):
        docs = self.workers("--nproc-per-node", "3")
        self.assertEqual(len(docs), 3)
        for family in ("keras", "jax"):
            self.assertEqual({d[family]["coordinator"] for d in docs}.__len__(), 1, family)
            self.assertEqual(sorted(d[family]["process_id"] for d in docs), [0, 1, 2])
            self.assertTrue(all(d[family]["num_processes"] == 3 for d in docs))
        self.assertEqual(len({d["torch"]["master"] for d in docs}), 1)
        for d in docs:
            self.assertEqual(d["keras"], d["jax"], "Keras must hand JAX exactly what distrun documents")
            self.assertEqual(d["jax"]["process_id"], d["torch"]["rank"])
            self.assertEqual(d["jax"]["num_processes"], d["torch"]["world_size"])
        # JAX's service and torch's store are different ports on process 0's host.
        jax_host, jax_port = docs[0]["jax"]["coordinator"].rsplit(":", 1)
        torch_host, torch_port = docs[0]["torch"]["master"].rsplit(":", 1)
        self.assertEqual(jax_host, torch_host)
        self.assertNotEqual(jax_port, torch_port)

    def test_per_task_workers_match_their_given_ids(self):
        # Four distrun processes of one job, as a launcher would start them; each runs one worker.
        procs = [subprocess.Popen(
            [DISTRUN, "--cluster-detection-method", "deactivate", "--num-processes", "4", "--process-id", str(i),
             "--coordinator-address", "127.0.0.1:29999", "--tag-output", "off", "--", "/usr/bin/python3", SCRIPT],
            env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True) for i in range(4)]
        docs = {}
        for i, p in enumerate(procs):
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            self.assertEqual(len(lines), 1)
            docs[i] = lines[0]
        for i, d in docs.items():
            self.assertEqual(d["jax"]["process_id"], i)
            self.assertEqual(d["keras"]["num_processes"], 4)
            self.assertEqual(d["torch"]["rank"], i)
        self.assertEqual(len({d["torch"]["master"] for d in docs.values()}), 1)
        self.assertEqual(len({d["jax"]["coordinator"] for d in docs.values()}), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
