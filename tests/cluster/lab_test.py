"""The lab itself: down and up again, twice, leave nothing behind and give a working cluster each time; up
on a running lab changes nothing. Ends with the lab up, as run_tests.sh expects."""
import os
import subprocess
import unittest

from cluster_harness import LAB, NODES, SLURM_CONF, is_zombie, lab_is_up, on_login_host

LAB_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lab.sh")


def lab(verb):
    return subprocess.run([LAB_SH, verb], capture_output=True, text=True, timeout=120)


def recorded_pids():
    pids = {}
    for name in os.listdir(os.path.join(LAB, "pids")):
        with open(os.path.join(LAB, "pids", name)) as f:
            pids[name] = int(f.read())
    return pids


def processes_mentioning(text):
    """Live processes whose command line holds `text` (the lab directory is in every daemon's)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and not is_zombie(int(name)):
            found.append(f"{name}: {cmdline}")
    return found


class LabCycle(unittest.TestCase):
    def setUp(self):
        if not lab_is_up():
            self.skipTest(f"the Slurm lab is not up under {LAB}; run tests/cluster/run_tests.sh")

    def check_gone(self, pids, hosts_before):
        self.assertEqual([f"{name}: {pid}" for name, pid in pids.items() if not is_zombie(pid)], [])
        self.assertEqual(processes_mentioning(LAB + "/"), [])
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        self.assertNotIn("distrun-lab-", netns)
        self.assertNotEqual(subprocess.run(["ip", "link", "show", "drlab0"], capture_output=True).returncode, 0)
        self.assertFalse(os.path.exists(LAB))
        with open("/etc/hosts") as f:
            self.assertEqual(f.read(), hosts_before)

    def check_cluster_works(self):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": SLURM_CONF}
        r = subprocess.run(on_login_host(["srun", f"-N{len(NODES)}", "--ntasks-per-node=1", "--gpus-per-task=1",
                                          "/bin/sh", "-c", 'echo "$(hostname) $CUDA_VISIBLE_DEVICES"']),
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.split("\n")[:-1]), [f"{n} 0" for n in NODES])

    def test_down_and_up_twice(self):
        with open("/etc/hosts") as f:
            hosts_before = f.read()
        for cycle in range(2):
            with self.subTest(cycle=cycle):
                pids = recorded_pids()
                r = lab("down")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check_gone(pids, hosts_before)
                r = lab("up")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.check_cluster_works()

    def test_up_on_a_running_lab_changes_nothing(self):
        pids = recorded_pids()
        r = lab("up")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already up", r.stderr)
        self.assertEqual(recorded_pids(), pids)


if __name__ == "__main__":
    unittest.main(verbosity=2)
