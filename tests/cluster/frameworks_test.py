"""Frameworks that find their world themselves, in real Slurm steps across the lab's hosts: JAX's
`jax.distributed.initialize()` with no arguments (the stand-in JAX of tests/frameworks, whose Slurm detection
reads the task's variables exactly as JAX's does), PyTorch Lightning's environment selection (2.x and 1.9),
Keras 3, and mpi4py. A per-node step (one distrun per host, two workers each) is where they would build a
wrong world from the distrun task's variables; a per-task step, where those variables are the worker's; an
elastic epoch change, where the world shrinks under them."""
import json
import os
import signal

from cluster_harness import DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, distrun_pids_on, main

STANDINS = os.path.join(REPO, "tests", "frameworks")
PROBE = os.path.join(STANDINS, "probe.py")


class FrameworksInSlurmSteps(JobRuntimeCase):
    def env(self, **extra):
        return super().env(PYTHONPATH=STANDINS, STANDIN_JAX_VERSION="0.11.2", HOME=self.dir, **extra)

    def step(self, layout, distrun_args, mode, *probe_args, python=(PYTHON,), **env):
        """srun LAYOUT distrun ARGS -- python probe.py MODE: every worker's document."""
        name = f"{mode}{len(os.listdir(self.dir))}"
        r = self.srun([*layout, "--output", self.path(f"{name}-%t.out"), "--error", self.path(f"{name}-%t.err"),
                       DISTRUN, *distrun_args, "--tag-output", "off", "--", *python, PROBE, mode, *probe_args],
                      env=self.env(**env))
        text = "".join(self.read(n) for n in sorted(os.listdir(self.dir)) if n.startswith(f"{name}-"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr + text)
        return [json.loads(line) for line in text.splitlines() if line.startswith("{")]

    def assert_jax_world(self, docs, size, cluster="DistrunCluster"):
        self.assertEqual(len(docs), size, docs)
        for d in docs:
            self.assertNotIn("error", d, d)
            self.assertEqual((d["cluster_env"], d["num_processes"], str(d["process_id"])),
                             (cluster, size, d["distrun_rank"]), d)
            self.assertEqual(d["all_ids"], list(range(size)), d)
        self.assertEqual(len({d["coordinator"] for d in docs}), 1, docs)
        # JAX's service runs in rank 0's worker, on node 0.
        self.assertEqual(docs[0]["coordinator"].rsplit(":", 1)[0], NODES[0])

    def assert_lightning_world(self, docs, size, per_node, environment):
        self.assertEqual(len(docs), size, docs)
        for d in docs:
            self.assertNotIn("error", d, d)
            rank = int(d["distrun_rank"])
            self.assertEqual((d["environment"], d["world_size"], d["global_rank"], d["local_rank"], d["node_rank"]),
                             (environment, size, rank, rank % per_node, rank // per_node), d)

    def test_per_node_step(self):
        per_node = ["-N3", "--ntasks-per-node=1"]
        # JAX's Slurm detection would read each distrun's task: two "process 0 of 3" per host.
        self.assert_jax_world(self.step(per_node, ["--nproc-per-node", "2"], "jax"), 6)
        self.assert_jax_world(self.step(per_node, ["--nproc-per-node", "2"], "keras", KERAS_BACKEND="jax"), 6)
        # Without distrun's hook (python -S runs no sitecustomize) JAX's own Slurm detection still finds the
        # plan: the workers' Slurm variables are the plan's.
        self.assert_jax_world(self.step(per_node, ["--nproc-per-node", "2"], "jax", python=(PYTHON, "-S")), 6,
                              cluster="SlurmCluster")
        # Lightning 2.x without torch's variables (--export): its SLURM environment reads the task
        # variables, which a per-node step's workers see as a per-task step would set them.
        self.assert_lightning_world(
            self.step(per_node, ["--nproc-per-node", "2", "--export", "jax,keras,distrun"], "lightning"), 6, 2,
            "SLURMEnvironment")
        # Lightning 1.9 tries SLURM before TorchElastic.
        self.assert_lightning_world(self.step(per_node, ["--nproc-per-node", "2"], "lightning1", "2", "3"), 6, 2,
                                    "SLURMEnvironment")
        # With torch's variables Lightning 2.x takes TorchElastic first.
        self.assert_lightning_world(self.step(per_node, ["--nproc-per-node", "2"], "lightning"), 6, 2,
                                    "TorchElasticEnvironment")

    def test_per_task_step(self):
        per_task = ["-N2", "--ntasks-per-node=2"]
        self.assert_jax_world(self.step(per_task, [], "jax"), 4)
        self.assert_lightning_world(self.step(per_task, [], "lightning1", "2", "2"), 4, 2, "SLURMEnvironment")

    def test_mpi4py_in_a_per_node_step_stops_naming_the_fix(self):
        # srun --mpi=pmix: the workers are no tasks of the step; their MPI_Init makes a world of one
        # process (Open MPI would otherwise take them for tasks srun started and abort without the step's
        # PMIx), and the import stops the worker with distrun's message.
        r = self.srun(["--mpi=pmix", "-N2", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", "2", "--", PYTHON,
                       "-c", "from mpi4py import MPI; print('joined', MPI.COMM_WORLD.Get_size())"])
        self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("joined", r.stdout)
        self.assertIn("distrun: mpi4py's world here is 1 process(es)", r.stderr)

    def test_every_epoch_of_an_elastic_step_finds_its_world(self):
        script = (f'{PYTHON} {PROBE} jax > "$0/jax-$DISTRUN_EPOCH-$DISTRUN_PROCESS_ID.json" || exit 1; '
                  'echo up > "$0/up-$DISTRUN_EPOCH-$DISTRUN_PROCESS_ID"; '
                  'if [ "$DISTRUN_EPOCH" = 0 ]; then sleep 60; fi')
        p = self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", "--no-kill", "--output",
                             self.path("%t.out"), "--error", self.path("%t.err"), DISTRUN, "--nnodes", "2:3",
                             "--nproc-per-node", "2", "--grace-period", "3", "--", "/bin/sh", "-c", script,
                             self.dir], env=self.env())
        self.wait_for_files([f"up-0-{rank}" for rank in range(6)], timeout=60, proc=p)
        [victim] = distrun_pids_on(NODES[2], self.marker)
        os.kill(victim, signal.SIGKILL)  # a distrun of this test's job
        self.wait_for_files([f"up-1-{rank}" for rank in range(4)], timeout=60, proc=p)
        p.communicate(timeout=60)

        def epoch(n, size):
            docs = []
            for rank in range(size):
                text = self.read(f"jax-{n}-{rank}.json")
                docs.extend(json.loads(line) for line in text.splitlines() if line.startswith("{"))
            return docs

        first, second = epoch(0, 6), epoch(1, 4)
        self.assert_jax_world(first, 6)
        self.assert_jax_world(second, 4)
        self.assertNotEqual(first[0]["coordinator"], second[0]["coordinator"])  # a fresh port each epoch


if __name__ == "__main__":
    main()
