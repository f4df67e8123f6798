"""`distrun --detect` end to end: the stable JSON interface, every format, and bad input."""
import os
import subprocess
import sys
import tempfile
import unittest

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, detect_json, fixture_env, fixture_tasks, run  # noqa: E402

TOP_KEYS = ["method", "launch_mode", "coordinator_address", "num_processes", "num_nodes", "node_rank", "hosts",
            "process_id", "local_rank", "local_world_size", "workers", "warnings"]
CONTRACT = ["DISTRUN_PROCESS_ID", "DISTRUN_NUM_PROCESSES", "DISTRUN_LOCAL_RANK", "DISTRUN_LOCAL_WORLD_SIZE",
            "DISTRUN_NODE_RANK", "DISTRUN_NUM_NODES", "DISTRUN_LOCAL_DEVICE_IDS", "DISTRUN_COORDINATOR_ADDRESS",
            "DISTRUN_RUN_ID", "DISTRUN_RESTART_COUNT", "DISTRUN_CLUSTER", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
            "JAX_COORDINATOR_ADDRESS", "KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
            "KERAS_DISTRIBUTION_PROCESS_ID"]


def slurm_step(procid, localid, nodeid, ntasks=8, nodes="node[001-002]", per_node="4(x2)", **extra):
    env = {"SLURM_JOB_ID": "1234", "SLURM_STEP_ID": "0", "SLURM_STEP_NODELIST": nodes,
           "SLURM_STEP_NUM_TASKS": str(ntasks), "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_TASKS_PER_NODE": per_node,
           "SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid), "SLURM_NODEID": str(nodeid),
           "SLURM_NTASKS": str(ntasks), "SLURM_JOB_NODELIST": nodes}
    env.update(extra)
    return env


class LocalDetect(unittest.TestCase):
    def test_json_has_the_stable_keys_and_the_contract(self):
        doc, _ = detect_json()
        for key in TOP_KEYS:
            self.assertIn(key, doc)
        self.assertEqual(doc["method"], "local")
        self.assertEqual(doc["launch_mode"], "per-node")
        self.assertIsNone(doc["process_id"])
        self.assertTrue(doc["coordinator_address"].startswith("127.0.0.1:"))
        self.assertEqual(len(doc["workers"]), 1)
        env = doc["workers"][0]["env"]
        for name in CONTRACT:
            self.assertIn(name, env)
        self.assertNotEqual(env["MASTER_PORT"], "29500")
        self.assertEqual(env["MASTER_ADDR"], "127.0.0.1")

    def test_nproc_per_node_makes_one_plan_per_worker(self):
        doc, _ = detect_json(extra_args=["--nproc-per-node", "3"])
        self.assertEqual([w["process_id"] for w in doc["workers"]], [0, 1, 2])
        self.assertEqual([w["env"]["LOCAL_RANK"] for w in doc["workers"]], ["0", "1", "2"])
        self.assertTrue(all(w["env"]["WORLD_SIZE"] == "3" for w in doc["workers"]))
        ports = {w["env"]["MASTER_PORT"] for w in doc["workers"]}
        self.assertEqual(len(ports), 1, "all workers must agree on MASTER_PORT")

    def test_local_device_ids_narrow_cuda_visible_devices_as_tokens(self):
        doc, _ = detect_json(extra_args=["--local-device-ids", "GPU-aaaa,GPU-bbbb"])
        self.assertEqual(len(doc["workers"]), 2)
        self.assertEqual([w["env"]["CUDA_VISIBLE_DEVICES"] for w in doc["workers"]], ["GPU-aaaa", "GPU-bbbb"])
        self.assertEqual([w["local_device_ids"] for w in doc["workers"]], [[0], [0]])

    def test_existing_omp_num_threads_is_kept(self):
        doc, _ = detect_json(env={"OMP_NUM_THREADS": "8"})
        self.assertNotIn("OMP_NUM_THREADS", doc["workers"][0]["env"])

    def test_export_chooses_families(self):
        doc, _ = detect_json(extra_args=["--export", "jax"])
        env = doc["workers"][0]["env"]
        self.assertIn("JAX_COORDINATOR_ADDRESS", env)
        self.assertNotIn("RANK", env)
        self.assertNotIn("DISTRUN_LOCAL_RANK", env)
        # JAX has no variables of its own for the count and id: distrun's JAX cluster reads these two.
        self.assertEqual((env["DISTRUN_PROCESS_ID"], env["DISTRUN_NUM_PROCESSES"]), ("0", "1"))

    def test_yaml_carries_the_same_content_and_option_sources(self):
        r = run(["--detect", "--format", "yaml", "--nproc-per-node", "2"], env={"DISTRUN_GPUS_PER_WORKER": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        doc = yaml.safe_load(r.stdout)
        for key in TOP_KEYS:
            self.assertIn(key, doc)
        self.assertEqual(len(doc["workers"]), 2)
        self.assertEqual(doc["options"]["nproc-per-node"], {"value": "2", "source": "flag"})
        self.assertEqual(doc["options"]["gpus-per-worker"], {"value": "1", "source": "environment"})
        self.assertEqual(doc["options"]["format"]["source"], "flag")

    def test_env_format_is_safe_to_eval(self):
        hostile = "x'; touch /tmp/distrun-pwned; echo '"
        r = subprocess.run(["bash", "-c", f'eval "$({DISTRUN} --detect --format env --run-id ok)"; '
                            'echo "$RANK|$WORLD_SIZE|$DISTRUN_DETECT_METHOD|$DISTRUN_RUN_ID"'],
                           env={"PATH": os.environ["PATH"], "HOSTILE": hostile, "MASTER_ADDR": hostile},
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), "0|1|local|ok")
        self.assertFalse(os.path.exists("/tmp/distrun-pwned"))


class SlurmDetect(unittest.TestCase):
    def test_real_srun_n4_capture(self):
        for i, env in enumerate(fixture_tasks("slurm-single/srun-n4-env.txt", 4)):
            doc, _ = detect_json(env=env)
            self.assertEqual(doc["method"], "slurm")
            self.assertEqual(doc["launch_mode"], "per-task")
            self.assertEqual(doc["num_processes"], 4)
            self.assertEqual(doc["process_id"], int(env["SLURM_PROCID"]))
            self.assertEqual(doc["local_rank"], int(env["SLURM_LOCALID"]))
            self.assertEqual(doc["hosts"], ["vm"])
            self.assertEqual(len(doc["workers"]), 1)

    def test_per_task_on_two_nodes(self):
        doc, _ = detect_json(env=slurm_step(5, 1, 1))
        self.assertEqual((doc["num_processes"], doc["num_nodes"], doc["node_rank"]), (8, 2, 1))
        self.assertEqual(doc["hosts"], ["node001", "node002"])
        self.assertTrue(doc["coordinator_address"].startswith("node001:"))
        w = doc["workers"][0]
        self.assertEqual((w["process_id"], w["local_rank"]), (5, 1))
        self.assertEqual(w["env"]["RANK"], "5")
        self.assertEqual(w["env"]["LOCAL_WORLD_SIZE"], "4")

    def test_gpus_per_task_keeps_the_tasks_own_gpu(self):
        # srun --gpus-per-task=1: each task sees only its GPU, renumbered as 0 (JAX would pick LOCALID).
        doc, _ = detect_json(env=slurm_step(3, 3, 0, CUDA_VISIBLE_DEVICES="0", SLURM_STEP_GPUS="3"))
        self.assertEqual(doc["workers"][0]["env"]["CUDA_VISIBLE_DEVICES"], "0")
        self.assertEqual(doc["warnings"], [])

    def test_shared_gpus_are_split_by_local_rank(self):
        doc, _ = detect_json(env=slurm_step(2, 2, 0, CUDA_VISIBLE_DEVICES="0,1,2,3"))
        self.assertEqual(doc["workers"][0]["env"]["CUDA_VISIBLE_DEVICES"], "2")

    def test_localid_beyond_visible_gpus_warns(self):
        doc, _ = detect_json(env=slurm_step(3, 3, 0, CUDA_VISIBLE_DEVICES="0,1"))
        self.assertTrue(any("SLURM_LOCALID=3" in w for w in doc["warnings"]), doc["warnings"])

    def test_one_task_per_node_is_per_node_mode(self):
        env = slurm_step(1, 0, 1, ntasks=2, per_node="1(x2)", CUDA_VISIBLE_DEVICES="0,1,2,3")
        doc, _ = detect_json(env=env)
        self.assertEqual(doc["launch_mode"], "per-node")
        self.assertEqual([w["process_id"] for w in doc["workers"]], [4, 5, 6, 7])
        self.assertEqual([w["env"]["CUDA_VISIBLE_DEVICES"] for w in doc["workers"]], ["0", "1", "2", "3"])

    def test_batch_script_without_srun_warns(self):
        env = fixture_env("slurm-single/job-5.out", prefix="BATCH: ")
        r = run(["--detect"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("srun", r.stderr)
        self.assertIn("warning", r.stderr)

    def test_explicit_values_win_field_by_field(self):
        doc, _ = detect_json(env=slurm_step(5, 1, 1, DISTRUN_COORDINATOR_ADDRESS="head:7000"),
                             extra_args=["--process-id", "6"])
        self.assertEqual(doc["coordinator_address"], "head:7000")
        self.assertEqual(doc["process_id"], 6)
        self.assertEqual(doc["num_processes"], 8)

    def test_two_steps_of_one_job_get_different_ports(self):
        a, _ = detect_json(env=slurm_step(0, 0, 0, SLURM_STEP_ID="0"))
        b, _ = detect_json(env=slurm_step(0, 0, 0, SLURM_STEP_ID="1"))
        self.assertNotEqual(a["coordinator_address"], b["coordinator_address"])


class BadInput(unittest.TestCase):
    def assertUsageError(self, args, env=None, mention=None, cwd=None):
        r = run(args, env=env, cwd=cwd)
        self.assertEqual(r.returncode, 2, f"{args} {env}: {r.stdout} {r.stderr}")
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("distrun: error: "), lines[0])
        if mention:
            self.assertIn(mention, lines[0])
        return lines[0]

    def test_flags(self):
        self.assertUsageError(["--detect", "--format", "xml"], mention="--format='xml'")
        self.assertUsageError(["--bogus"], mention="--bogus")
        self.assertUsageError(["--detect", "--nproc-per-node", "-1"])
        self.assertUsageError(["--detect", "--coordinator-port", "70000"], mention="70000")
        self.assertUsageError(["--detect", "--cluster-detection-method", "pbs"], mention="pbs")
        self.assertUsageError(["--detect", "--process-id", "4", "--num-processes", "4"], mention="--process-id")

    def test_variables(self):
        self.assertUsageError(["--detect"], env={"DISTRUN_NPROC_PER_NODE": "many"}, mention="DISTRUN_NPROC_PER_NODE")
        self.assertUsageError(["--detect"], env=slurm_step("abc", 0, 0), mention="SLURM_PROCID='abc'")
        self.assertUsageError(["--detect"], env=slurm_step(9, 0, 0), mention="SLURM_PROCID")
        self.assertUsageError(["--detect"], env=slurm_step(0, 0, 0, nodes="node[3-1]"), mention="node[3-1]")
        self.assertUsageError(["--detect"], env=slurm_step(0, 0, 0, per_node="4(x2"), mention="SLURM_STEP_TASKS_PER_NODE")

    def test_named_method_without_its_environment(self):
        line = self.assertUsageError(["--detect", "--cluster-detection-method", "slurm"])
        self.assertIn("SLURM_STEP_NODELIST", line)

    def test_config_file_errors_name_file_line_and_column(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "distrun.yaml")
            with open(path, "w") as f:
                f.write("nproc_per_node: 2\nnproc_per_nod: 4\n")
            line = self.assertUsageError(["--detect"], cwd=d)
            self.assertIn("distrun.yaml:2:1", line)
            self.assertIn("nproc_per_node", line)
            with open(path, "w") as f:
                f.write("nproc_per_node: [1\n")
            self.assertUsageError(["--detect"], cwd=d, mention="distrun.yaml:")
        self.assertUsageError(["--detect", "--config", "/nonexistent/distrun.yaml"], mention="/nonexistent")

    def test_no_command(self):
        self.assertUsageError([], mention="no command")


class Warnings(unittest.TestCase):
    def test_proxy_variable_warns_without_leaking_credentials(self):
        doc, _ = detect_json(env={"https_proxy": "http://user:secret@proxy:3128"})
        text = " ".join(doc["warnings"])
        self.assertIn("https_proxy", text)
        self.assertNotIn("secret", text)
        doc, _ = detect_json(env={"https_proxy": "http://proxy:3128", "no_proxy": "127.0.0.1,localhost"})
        self.assertEqual(doc["warnings"], [])

    def test_localhost_coordinator_across_hosts_warns(self):
        doc, _ = detect_json(env=slurm_step(0, 0, 0), extra_args=["--coordinator-address", "localhost"])
        self.assertTrue(any("loopback" in w for w in doc["warnings"]), doc["warnings"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
