"""distrun under a real Slurm: srun steps on the lab's virtual hosts, fake GPUs, sbatch jobs, scancel."""
import os

from cluster_harness import DISTRUN, GPUS_PER_NODE, NODES, PYTHON, ClusterCase, main


class SrunDetect(ClusterCase):
    def test_gpus_per_task_gives_each_task_its_id_and_its_own_gpu(self):
        r = self.srun(["-N2", "--ntasks-per-node=2", "--gpus-per-task=1", "--output", self.path("%t.json"),
                       "--error", self.path("%t.err"), DISTRUN, "--detect", "--format", "json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        docs = [self.read_json(f"{t}.json") for t in range(4)]
        tokens_by_node = {}
        for task, doc in enumerate(docs):
            with self.subTest(task=task):
                self.assertEqual(doc["method"], "slurm")
                self.assertEqual(doc["launch_mode"], "per-task")
                self.assertEqual(doc["num_processes"], 4)
                self.assertEqual(doc["process_id"], task)
                self.assertEqual(doc["local_rank"], task % 2)
                self.assertEqual(doc["local_world_size"], 2)
                self.assertEqual(doc["num_nodes"], 2)
                self.assertEqual(doc["node_rank"], task // 2)
                self.assertEqual(doc["hosts"], NODES[:2])
                self.assertEqual(doc["coordinator_address"].rsplit(":", 1)[0], "node1")
                self.assertEqual(doc["warnings"], [])
                self.assertEqual(self.read(f"{task}.err"), "")
                # Slurm gave this task one GPU; its only worker keeps exactly that token.
                self.assertEqual(len(doc["local_devices"]), 1, doc["local_devices"])
                self.assertEqual(doc["device_source"], "CUDA_VISIBLE_DEVICES")
                [worker] = doc["workers"]
                self.assertEqual(worker["process_id"], task)
                self.assertEqual(worker["env"]["RANK"], str(task))
                self.assertEqual(worker["env"]["WORLD_SIZE"], "4")
                self.assertEqual(worker["env"]["LOCAL_RANK"], str(task % 2))
                self.assertEqual(worker["env"]["MASTER_ADDR"], "node1")
                self.assertEqual(worker["env"]["CUDA_VISIBLE_DEVICES"], doc["local_devices"][0])
                tokens_by_node.setdefault(doc["node_rank"], []).append(doc["local_devices"][0])
        for node, tokens in tokens_by_node.items():
            self.assertEqual(len(set(tokens)), 2, f"tasks on node {node} share a GPU: {tokens}")
            self.assertTrue(set(tokens) <= {str(g) for g in range(GPUS_PER_NODE)}, tokens)

    def test_tokens_match_what_slurm_gave_each_task(self):
        # Each task records Slurm's CUDA_VISIBLE_DEVICES, then becomes distrun.
        r = self.srun(["-N2", "--ntasks-per-node=2", "--gpus-per-task=1", "/bin/sh", "-c",
                       f'printf %s "$CUDA_VISIBLE_DEVICES" > {self.dir}/$SLURM_PROCID.cvd && '
                       f'exec {DISTRUN} --detect --format json > {self.dir}/$SLURM_PROCID.json'])
        self.assertEqual(r.returncode, 0, r.stderr)
        for task in range(4):
            doc = self.read_json(f"{task}.json")
            self.assertEqual(doc["workers"][0]["env"]["CUDA_VISIBLE_DEVICES"], self.read(f"{task}.cvd"))

    def test_one_distrun_per_node_plans_one_worker_per_gpu(self):
        r = self.srun([f"-N{len(NODES)}", "--ntasks-per-node=1", "--gres=gpu:2", "--output",
                       self.path("%t.json"), DISTRUN, "--detect", "--format", "json"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for node in range(len(NODES)):
            with self.subTest(node=node):
                doc = self.read_json(f"{node}.json")
                self.assertEqual(doc["method"], "slurm")
                self.assertEqual(doc["launch_mode"], "per-node")
                self.assertEqual(doc["node_rank"], node)
                self.assertEqual(doc["num_nodes"], len(NODES))
                self.assertEqual(doc["hosts"], NODES)
                self.assertEqual([w["local_rank"] for w in doc["workers"]], [0, 1])
                self.assertEqual([w["env"]["CUDA_VISIBLE_DEVICES"] for w in doc["workers"]], ["0", "1"])
                self.assertEqual([w["env"]["GROUP_RANK"] for w in doc["workers"]], [str(node)] * 2)

    def test_per_task_launch_runs_every_worker_with_its_rank(self):
        r = self.srun(["-N2", "--ntasks-per-node=2", "--output", self.path("%t.out"), DISTRUN, "--tag-output",
                       "off", "--", "/bin/sh", "-c",
                       'echo "$(hostname) $RANK $WORLD_SIZE $LOCAL_RANK $DISTRUN_NODE_RANK $MASTER_ADDR"'])
        self.assertEqual(r.returncode, 0, r.stderr)
        for task in range(4):
            self.assertEqual(self.read(f"{task}.out").split(),
                             [NODES[task // 2], str(task), "4", str(task % 2), str(task // 2), "node1"])

    def test_without_a_token_the_job_runs_and_each_distrun_warns(self):
        # Without a token munge protects the job: the lab's munged, named by slurm.conf's AuthInfo. With munge
        # off too, the job still runs and every distrun warns that nothing protects it.
        for extra, protected in (([], True), (["--munge", "off"], False)):
            r = self.srun(["-N2", "--ntasks-per-node=1", "--output", self.path("%t.out"), "--error",
                           self.path("%t.err"), DISTRUN, "--tag-output", "off", *extra, "--", "/bin/sh", "-c",
                           'echo "$RANK"'], env=self.env(DISTRUN_TOKEN=None))
            self.assertEqual(r.returncode, 0, r.stderr)
            for task in range(2):
                self.assertEqual(self.read(f"{task}.out"), f"{task}\n")
                err = self.read(f"{task}.err")
                if protected:
                    self.assertNotIn("no job token", err)
                else:
                    self.assertIn("DISTRUN_TOKEN", err)
            if protected:
                self.assertIn("protection: munge", self.read("0.err"))


class Sbatch(ClusterCase):
    def test_batch_script_runs_srun_distrun_and_warns_without_srun(self):
        d = self.dir
        job = self.sbatch(f"""#!/bin/bash
set -euo pipefail
srun --output={d}/detect-%t.json {DISTRUN} --detect --format json
srun --output={d}/launch-%t.out {DISTRUN} --tag-output off -- \\
  {PYTHON} -c 'import os, socket; print(socket.gethostname(), os.environ["RANK"], os.environ["WORLD_SIZE"])'
# The batch script itself, without srun: distrun sees this node alone and says so.
{DISTRUN} --detect --format json > {d}/batch.json
{DISTRUN} --detect > {d}/batch.txt 2> {d}/batch.err
echo batch-done
""", ["-N2", "--ntasks-per-node=2"])
        info = self.wait_job(job)
        self.assertEqual((info["JobState"], info["ExitCode"]), ("COMPLETED", "0:0"), self.read(f"slurm-{job}.out"))
        self.assertIn("batch-done", self.read(f"slurm-{job}.out"))
        for task in range(4):
            with self.subTest(task=task):
                doc = self.read_json(f"detect-{task}.json")
                self.assertEqual((doc["method"], doc["process_id"], doc["num_processes"], doc["node_rank"]),
                                 ("slurm", task, 4, task // 2))
                self.assertEqual(doc["run_id"].split(".")[0], job)
                self.assertEqual(self.read(f"launch-{task}.out").split(), [NODES[task // 2], str(task), "4"])
        batch = self.read_json("batch.json")
        self.assertEqual(batch["method"], "local")
        self.assertEqual(len(batch["warnings"]), 1, batch["warnings"])
        self.assertIn(f"SLURM_JOB_ID={job}", batch["warnings"][0])
        self.assertIn("srun distrun", batch["warnings"][0])
        # In text mode the warning goes to stderr.
        self.assertIn(f"distrun: warning: SLURM_JOB_ID={job}", self.read("batch.err"))
        self.assertIn("srun distrun", self.read("batch.err"))


class Scancel(ClusterCase):
    def test_scancel_lets_workers_clean_up_and_leaves_nothing(self):
        script = self.path("worker.sh")
        with open(script, "w") as f:
            f.write(f"""#!/bin/bash
# Says it is ready, then on SIGTERM writes a marker (its cleanup) and exits.
trap 'echo "$RANK" > {self.dir}/term-$RANK; exit 0' TERM
echo ready > {self.dir}/ready-$RANK
while :; do sleep 0.1; done
""")
        os.chmod(script, 0o755)
        p = self.srun_popen(["-N2", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", "2", "--grace-period",
                             "20", "--", script])
        self.wait_for_files([f"ready-{r}" for r in range(4)], proc=p)
        self.slurm(["scancel", "--name", self.marker_value])
        out, err = p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0, out + err)
        for rank in range(4):
            self.assertTrue(os.path.exists(self.path(f"term-{rank}")),
                            f"worker {rank} did not run its SIGTERM handler:\n{out}\n{err}")
        # tearDown checks that no process of the job remains on any host.


if __name__ == "__main__":
    main()
