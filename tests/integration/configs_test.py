"""Every shipped profile in configs/ loads, and its keys show up as coming from the config; the Kubernetes
JobSet manifest is a JobSet whose pods, as the JobSet controller would make them, each detect their node."""
import glob
import json
import os
import subprocess
import sys
import unittest

import yaml

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, run  # noqa: E402

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "configs")
JOBSET = os.path.join(CONFIG_DIR, "kubernetes-jobset.yaml")
# Kubernetes manifests live beside the distrun.yaml profiles but are not profiles.
CONFIGS = sorted(p for p in glob.glob(os.path.join(CONFIG_DIR, "*.yaml")) if os.path.basename(p) != "kubernetes-jobset.yaml")


class ShippedConfigs(unittest.TestCase):
    def test_there_are_profiles(self):
        names = {os.path.basename(c) for c in CONFIGS}
        for expected in ("workstation.yaml", "slurm-gpu.yaml", "mpi.yaml", "tpu.yaml", "kubernetes.yaml"):
            self.assertIn(expected, names)

    def test_each_profile_loads_and_its_keys_come_from_the_file(self):
        for path in CONFIGS:
            with self.subTest(config=os.path.basename(path)):
                with open(path) as f:
                    keys = yaml.safe_load(f)
                # As on a GPU node: profiles may ask for one worker per GPU.
                r = run(["--dry-run", "--format", "yaml", "--config", path], env={"CUDA_VISIBLE_DEVICES": "0,1,2,3"})
                self.assertEqual(r.returncode, 0, r.stderr)
                doc = yaml.safe_load(r.stdout)
                for key, value in keys.items():
                    if key == "command":
                        continue
                    option = doc["options"][key.replace("_", "-")]
                    self.assertEqual(option["source"], "config", key)
                self.assertGreaterEqual(len(doc["workers"]), 1)


def load_jobset():
    with open(JOBSET) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    assert len(docs) == 1, "one JobSet"
    return docs[0]


def pod_env(container, jobset_name, rjob, job_index, pod_index):
    """The variables the container gets in pod `pod_index` of Job `job_index`, with the annotations the
    JobSet controller puts on its pods and the index the Job controller sets."""
    annotations = {
        "jobset.sigs.k8s.io/jobset-name": jobset_name,
        "jobset.sigs.k8s.io/replicatedjob-name": rjob["name"],
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(rjob["replicas"]),
        "jobset.sigs.k8s.io/job-index": str(job_index),
    }
    env = {"JOB_COMPLETION_INDEX": str(pod_index)}
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = str(var["value"])
        elif "fieldRef" in var["valueFrom"]:
            path = var["valueFrom"]["fieldRef"]["fieldPath"]
            prefix = "metadata.annotations['"
            assert path.startswith(prefix) and path.endswith("']"), path
            env[var["name"]] = annotations[path[len(prefix):-2]]
        elif "secretKeyRef" in var["valueFrom"]:
            env[var["name"]] = "0123456789abcdef0123456789abcdef"
        else:
            raise AssertionError(f"unexpected env source {var}")
    return env


class KubernetesJobSet(unittest.TestCase):
    def test_is_a_jobset_running_distrun(self):
        js = load_jobset()
        self.assertEqual(js["apiVersion"], "jobset.x-k8s.io/v1alpha2")
        self.assertEqual(js["kind"], "JobSet")
        self.assertTrue(js["spec"]["network"]["enableDNSHostnames"])
        (rjob,) = js["spec"]["replicatedJobs"]
        job = rjob["template"]["spec"]
        self.assertEqual(job["completionMode"], "Indexed")
        self.assertEqual(job["parallelism"], job["completions"])
        (container,) = job["template"]["spec"]["containers"]
        self.assertEqual(container["command"][0], "distrun")
        env = {v["name"]: v for v in container["env"]}
        for name in ("JOBSET_NAME", "REPLICATED_JOB_NAME", "REPLICATED_JOB_REPLICAS", "JOB_INDEX", "DISTRUN_TOKEN"):
            self.assertIn(name, env)
        # Nothing in a pod says how many pods there are: the manifest must say it, and say it right.
        self.assertEqual(int(env["DISTRUN_NUM_NODES"]["value"]), rjob["replicas"] * job["completions"])

    def test_every_pod_detects_its_node(self):
        if subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
            self.skipTest("cannot give a process its own hostname here (unshare --uts needs root)")
        js = load_jobset()
        name = js["metadata"]["name"]
        (rjob,) = js["spec"]["replicatedJobs"]
        job = rjob["template"]["spec"]
        (container,) = job["template"]["spec"]["containers"]
        pods = [(j, p) for j in range(rjob["replicas"]) for p in range(job["completions"])]
        expected_hosts = [f"{name}-{rjob['name']}-{j}-{p}.{name}" for j, p in pods]
        coordinators = set()
        for j, p in pods:
            hostname = f"{name}-{rjob['name']}-{j}-{p}"
            with self.subTest(pod=hostname):
                env = pod_env(container, name, rjob, j, p)
                env["PATH"] = "/usr/sbin:/usr/bin:/sbin:/bin"
                env["TPU_SKIP_MDS_QUERY"] = "1"  # no metadata server to ask here
                # The pod's command, planned instead of run.
                args = [DISTRUN, "--dry-run", "--format", "json", *container["command"][1:]]
                r = subprocess.run(["unshare", "--uts", "/bin/sh", "-c", 'hostname "$0" && exec "$@"', hostname, *args],
                                   env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 0, r.stderr)
                doc = json.loads(r.stdout)
                self.assertEqual(doc["method"], "k8s")
                self.assertEqual(doc["launch_mode"], "per-node")
                self.assertEqual(doc["num_nodes"], len(pods))
                self.assertEqual(doc["node_rank"], j * job["completions"] + p)
                self.assertEqual(doc["hosts"], expected_hosts)
                host, _, port = doc["coordinator_address"].rpartition(":")
                self.assertEqual(host, expected_hosts[0])
                coordinators.add(doc["coordinator_address"])
        self.assertEqual(len(coordinators), 1, "every pod finds the same coordinator")


if __name__ == "__main__":
    unittest.main(verbosity=2)
