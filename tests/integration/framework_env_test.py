"""What JAX, Keras and PyTorch would read under distrun is consistent across every worker."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

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

    def test_per_task_worker_matches_the_given_ids(self):
        docs = self.workers("--cluster-detection-method", "deactivate", "--num-processes", "4", "--process-id", "2",
                            "--coordinator-address", "127.0.0.1:29999")
        self.assertEqual(len(docs), 1)
        self.assertEqual(docs[0]["jax"]["process_id"], 2)
        self.assertEqual(docs[0]["keras"]["num_processes"], 4)
        self.assertEqual(docs[0]["torch"]["rank"], 2)


if __name__ == "__main__":
    unittest.main(verbosity=2)
