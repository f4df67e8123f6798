"""The Python module `distrun` across the lab's virtual hosts: workers on different hosts exchange values
through the job's key-value store, wait for each other's keys and meet at barriers, all through node 0's
runtime.

Skipped, with the reason, when this distrun does not join the nodes of a job yet (see
cluster_harness.distrun_has_job_runtime)."""
import json
import os
import unittest

from cluster_harness import DISTRUN, NODES, JobRuntimeCase, main
from python_workers import LIBRARY, module_env, python_command

WORKER = """\
import json, socket
import distrun
r, world = distrun.rank(), distrun.world_size()
distrun.set(f"host/{r}", socket.gethostname())
distrun.barrier("published", timeout=60)
hosts = distrun.list("host/", text=True)
# The last worker (on the last host) answers the first (on the first host) once it has asked.
if r == 0:
    distrun.set("asked", "1")
    answer = distrun.get("answer", timeout=60, text=True)
elif r == world - 1:
    distrun.get("asked", timeout=60)
    distrun.set("answer", f"from {socket.gethostname()}")
    answer = None
else:
    answer = None
distrun.add("sum", r)
distrun.barrier("added", timeout=60)
print(json.dumps({"rank": r, "world": world, "node_rank": distrun.node_rank(), "num_nodes": distrun.num_nodes(),
                  "host": socket.gethostname(), "hosts": hosts, "answer": answer,
                  "sum": int(distrun.get("sum"))}), flush=True)
"""


class PythonModuleAcrossHosts(JobRuntimeCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.path.isfile(LIBRARY):
            raise unittest.SkipTest(f"no client library at {LIBRARY}")

    def test_workers_on_every_host_exchange_values_and_meet_at_barriers(self):
        n, per_node = len(NODES), 2
        script = self.path("worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        r = self.srun([f"-N{n}", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", str(per_node),
                       "--tag-output", "off", "--", *python_command(), script],
                      env=self.env(**module_env()), timeout=180)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        rows = sorted((json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")),
                      key=lambda row: row["rank"])
        world = n * per_node
        self.assertEqual([row["rank"] for row in rows], list(range(world)), r.stdout + r.stderr)
        # Ranks go by node: each host has its own, in order.
        self.assertEqual([row["host"] for row in rows], [node for node in NODES for _ in range(per_node)])
        everyone = {f"host/{row['rank']}": row["host"] for row in rows}
        for row in rows:
            with self.subTest(rank=row["rank"]):
                self.assertEqual(row["world"], world)
                self.assertEqual(row["num_nodes"], n)
                self.assertEqual(row["node_rank"], row["rank"] // per_node)
                self.assertEqual(row["hosts"], everyone)  # what every other host published
                self.assertEqual(row["sum"], world * (world - 1) // 2)
        self.assertEqual(rows[0]["answer"], f"from {NODES[-1]}")


if __name__ == "__main__":
    main()
