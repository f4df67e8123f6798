"""GPUs end to end, on any machine: `distrun check` without a GPU, the GPU list of --detect and --cpu-bind
through the fake CUDA driver (tests/fake_cuda, found by the dynamic loader on LD_LIBRARY_PATH), with the
real sysfs entries of this machine's PCI devices standing in for GPUs."""
import glob
import os
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, detect_json, run  # noqa: E402

FAKE_CUDA_DIR = os.environ.get("DISTRUN_FAKE_CUDA_DIR",
                               os.path.join(os.path.dirname(DISTRUN), "tests", "fake_cuda"))
CHECK_WORKER = os.path.join(os.path.dirname(DISTRUN), "distrun-check-worker")
PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def has_real_gpu():
    return bool(glob.glob("/proc/driver/nvidia/gpus/*")) or bool(glob.glob("/dev/nvidia[0-9]*")) or \
        os.path.exists("/dev/kfd")


def parse_cpulist(text):
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def pci_devices_with_local_cpus():
    """(bus id, local CPUs, NUMA node) of this machine's PCI devices that have a local_cpulist."""
    out = []
    for path in sorted(glob.glob("/sys/bus/pci/devices/*")):
        try:
            with open(os.path.join(path, "local_cpulist")) as f:
                local = parse_cpulist(f.read())
            numa = -1
            if os.path.exists(os.path.join(path, "numa_node")):
                with open(os.path.join(path, "numa_node")) as f:
                    numa = int(f.read())
        except (OSError, ValueError):
            continue
        out.append((os.path.basename(path), local, numa))
    return out


def fake_gpus(count, pci_bus_ids=None):
    env = {"LD_LIBRARY_PATH": FAKE_CUDA_DIR, "FAKE_CUDA_DEVICES": str(count)}
    if pci_bus_ids:
        env["FAKE_CUDA_PCI_BUS_IDS"] = ",".join(pci_bus_ids)
    return env


def run_pinned(args, env, cpus):
    """distrun with `env` (plus PATH) and its own affinity narrowed to `cpus`, as taskset or a cgroup would."""
    full_env = {"PATH": PATH}
    full_env.update(env)
    return subprocess.run([DISTRUN] + list(args), env=full_env, capture_output=True, text=True, timeout=30,
                          stdin=subprocess.DEVNULL, preexec_fn=lambda: os.sched_setaffinity(0, cpus))


def fmt(cpus):
    return ",".join(str(c) for c in sorted(cpus))


class CheckWithoutGpu(unittest.TestCase):
    @unittest.skipIf(has_real_gpu(), "this machine has a GPU")
    def test_no_gpu_is_a_message_and_exit_1(self):
        r = run(["check"])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertEqual(r.stdout, "")
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertTrue(lines[0].startswith("distrun: check: no GPU found on %s (" % socket.gethostname()), lines[0])
        for looked_at in ("CUDA driver (libcuda.so.1)", "/proc/driver/nvidia/gpus", "/dev/nvidia[0-9]*"):
            self.assertIn(looked_at, lines[0])
        self.assertTrue(lines[0].endswith("); nothing to check"), lines[0])

    def test_every_gpu_hidden_is_no_gpu(self):
        r = run(["check"], env={"CUDA_VISIBLE_DEVICES": ""})
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("(CUDA_VISIBLE_DEVICES='' hides every GPU); nothing to check", r.stderr)

    def test_a_malformed_variable_is_a_usage_error(self):
        r = run(["check"], env={"CUDA_VISIBLE_DEVICES": "0,,1"})
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("CUDA_VISIBLE_DEVICES='0,,1'", r.stderr)

    def test_help(self):
        r = run(["check", "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("usage: distrun check", r.stdout)

    def test_with_gpus_it_runs_the_check_worker_over_every_gpu(self):
        # --dry-run is distrun's own option, passed on: it shows the plan of the check without running it.
        r = run(["check", "--dry-run"], env=fake_gpus(2))
        if os.access(CHECK_WORKER, os.X_OK):
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("processes         2 in the job, 2 started here", r.stdout)
            self.assertIn("command           %s\n" % CHECK_WORKER, r.stdout)
        else:
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("has 2 GPUs, but this distrun was built without NCCL", r.stderr)


class DetectGpus(unittest.TestCase):
    def test_each_gpu_with_index_uuid_and_pci_bus_id(self):
        doc, _ = detect_json(env=fake_gpus(2, ["0000:3B:00.0"]))
        self.assertEqual(doc["gpu_source"], "cuda-driver")
        self.assertEqual(doc["local_devices"], ["0", "1"])
        self.assertEqual([(g["index"], g["token"], g["uuid"], g["pci_bus_id"], g["name"]) for g in doc["gpus"]], [
            (0, "0", "GPU-10010203-0405-0607-0809-0a0b0c0d0e0f", "0000:3b:00.0", "Fake GPU 0"),
            (1, "1", "GPU-20010203-0405-0607-0809-0a0b0c0d0e0f", "0000:a1:00.0", "Fake GPU 1"),
        ])
        self.assertEqual([w["cpus"] for w in doc["workers"]], [[], []])
        self.assertEqual(doc["cpu_bind"], "none")

    def test_text_lists_them(self):
        r = run(["--detect"], env=fake_gpus(1))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gpus (cuda-driver)\n  0  GPU-10010203-0405-0607-0809-0a0b0c0d0e0f  0000:a0:00.0  Fake GPU 0\n",
                      r.stdout)


class CpuBind(unittest.TestCase):
    def setUp(self):
        self.devices = pci_devices_with_local_cpus()
        if not self.devices:
            self.skipTest("no PCI device with a local_cpulist in this machine's sysfs")
        self.allowed = os.sched_getaffinity(0)

    def test_workers_run_on_the_cpus_near_their_gpu(self):
        pci, local, _ = self.devices[0]
        expected = (local & self.allowed) or self.allowed
        env = fake_gpus(1, [pci])
        doc, _ = detect_json(env=env, extra_args=["--cpu-bind", "gpu"])
        self.assertEqual(doc["cpu_bind"], "gpu")
        self.assertEqual(doc["workers"][0]["cpus"], sorted(expected))
        r = run(["--cpu-bind", "gpu", "--", "grep", "Cpus_allowed_list", "/proc/self/status"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(parse_cpulist(r.stdout.split(":", 1)[1]), expected)

    def test_binding_stays_within_distruns_own_cpus(self):
        # distrun itself on one CPU near the GPU (taskset, a Slurm cgroup): the worker gets that CPU.
        pci, local, _ = self.devices[0]
        usable = sorted(local & self.allowed)
        if not usable:
            self.skipTest("no CPU near %s is usable here" % pci)
        cpu = usable[-1]
        env = fake_gpus(1, [pci])
        r = run_pinned(["--detect", "--format", "json", "--cpu-bind", "gpu"], env, {cpu})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"cpus": [%d]' % cpu, r.stdout)
        r = run_pinned(["--cpu-bind", "gpu", "--", "grep", "Cpus_allowed_list", "/proc/self/status"], env, {cpu})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "Cpus_allowed_list:\t%d\n" % cpu)

    def test_numa_binding_uses_the_gpus_numa_node(self):
        pci, local, numa = self.devices[0]
        near = local
        if numa >= 0:
            with open("/sys/devices/system/node/node%d/cpulist" % numa) as f:
                near = parse_cpulist(f.read())
        doc, _ = detect_json(env=fake_gpus(1, [pci]), extra_args=["--cpu-bind", "numa"])
        self.assertEqual(doc["workers"][0]["cpus"], sorted((near & self.allowed) or self.allowed))

    def test_a_gpu_without_sysfs_entries_is_left_unpinned_with_a_warning(self):
        env = fake_gpus(2, ["0000:00:00.0", "ffff:ff:1f.7"])
        r = run(["--cpu-bind", "gpu", "--", "true"], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("distrun: warning: --cpu-bind=gpu: local rank 1 is not pinned: GPU ffff:ff:1f.7: cannot read "
                      "/sys/bus/pci/devices/ffff:ff:1f.7/local_cpulist", r.stderr)

    @unittest.skipIf(has_real_gpu(), "this machine has a GPU")
    def test_without_any_gpu_it_is_an_error(self):
        r = run(["--detect", "--cpu-bind", "gpu"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("distrun: error: --cpu-bind=gpu but no GPU was found (", r.stderr)
        self.assertIn("use --cpu-bind none on a machine without GPUs", r.stderr)
        self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)


class DriverThreads(unittest.TestCase):
    """cuInit starts threads (the real driver's and the fake's) while distrun discovers GPUs, before it
    supervises. A thread that leaves SIGCHLD unblocked takes a worker's exit notice and drops it, so distrun
    never hears that its worker ended: a job that hung after `distrun check` passed on an H100."""

    SIGNALS = {"SIGINT": 2, "SIGTERM": 15, "SIGCHLD": 17}

    def test_every_thread_of_distrun_blocks_the_signals_it_reads(self):
        # The worker's parent is distrun: each of its threads' name and blocked signals.
        script = 'for t in /proc/$PPID/task/*; do echo "thread $(cat $t/comm) $(grep SigBlk $t/status)"; done'
        r = run(["--", "/bin/sh", "-c", script], env=fake_gpus(1), timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        threads = [line.split() for line in r.stdout.splitlines() if line.startswith("thread ")]
        self.assertGreaterEqual(len(threads), 2, r.stdout)  # the main thread and the driver's at least
        for fields in threads:
            blocked = int(fields[-1], 16)
            for name, number in self.SIGNALS.items():
                self.assertTrue(blocked & (1 << (number - 1)), f"{name} not blocked in {fields}: {r.stdout}")

    def test_single_worker_jobs_end(self):
        # Without tagged output a lone worker has no pipe whose end could tell distrun it exited.
        for _ in range(10):
            r = run(["--", "/bin/true"], env=fake_gpus(1), timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)


if __name__ == "__main__":
    unittest.main()
