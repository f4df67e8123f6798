"""What the cluster and ssh tests' harnesses (tests/cluster/cluster_harness.py, tests/ssh/ssh_harness.py)
share: LabCase, the base of their test cases (a marker and a scratch directory per test; afterwards no
marked process may remain), and helpers for the processes of a lab of virtual hosts, each a network
namespace on one machine (same file system, same process table)."""
import os
import shutil
import signal
import sys
import unittest
import uuid

KIT = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(KIT))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

from launch_helpers import describe, wait_for  # noqa: E402

# Debian's interpreter: python3-torch and python3-mpi4py are installed for it only.
PYTHON = "/usr/bin/python3"
BASE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
MARKER_NAME = "DISTRUN_TEST_MARKER"


def is_zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def namespace_inode(namespace):
    """The inode of a named network namespace (/run/netns/NAME): a process is in it when its
    /proc/PID/ns/net has the same one."""
    return os.stat(f"/run/netns/{namespace}").st_ino


def recorded_pid(lab, name):
    """The PID that the lab's lab.sh recorded for one of its processes ($LAB/pids/NAME.pid)."""
    with open(os.path.join(lab, "pids", f"{name}.pid")) as f:
        return int(f.read())


def in_namespaces_of(pid, args):
    """The command line that runs `args` in a process's network, UTS and mount namespaces: on its host."""
    return ["nsenter", "--target", str(pid), "--net", "--uts", "--mount", "--", *args]


def kill_all(pids, sig=signal.SIGKILL):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


class LabCase(unittest.TestCase):
    """Each test gets a marker (DISTRUN_TEST_MARKER=dt-...) and a scratch directory under the lab that every
    host sees; the clients it starts go in self.procs. Afterwards the clients are killed, the lab is put
    right (settle_lab), every process that still carries the marker is reported and killed, and the test
    fails if there was one, or if lab_leftovers() names anything.

    A subclass sets LAB, LAB_NAME and RUN_TESTS, and defines lab_is_up, marked_processes, and where needed
    host_of, settle_lab, lab_leftovers and client_env."""
    LAB = None
    LAB_NAME = "the lab"
    RUN_TESTS = None
    # How long the marked processes get to end by themselves after the test.
    MARKED_GRACE = 5
    # Whose processes they are, in the failure's words.
    MARKED_OWNER = "the test"

    @staticmethod
    def lab_is_up():
        raise NotImplementedError

    @classmethod
    def setUpClass(cls):
        if not cls.lab_is_up():
            raise unittest.SkipTest(f"{cls.LAB_NAME} is not up under {cls.LAB}; run {cls.RUN_TESTS}")

    def setUp(self):
        self.marker_name = MARKER_NAME
        self.marker_value = "dt-" + uuid.uuid4().hex[:16]
        self.marker = f"{self.marker_name}={self.marker_value}"
        self.dir = os.path.join(self.LAB, "jobs", self.marker_value)
        os.makedirs(self.dir)
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()  # a client this test started, still running
            p.communicate()
        self.settle_lab()
        wait_for(lambda: not self.marked_processes(), timeout=self.MARKED_GRACE)
        left = self.marked_processes()
        report = "\n".join(self.describe_marked(p) for p in left)
        kill_all(left)  # each carries this test's unique marker: this test started it
        leftovers = self.lab_leftovers()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(left, [], f"processes of {self.MARKED_OWNER} outlived it:\n" + report)
        self.assertFalse(leftovers, leftovers)

    def settle_lab(self):
        """What puts the lab right after a test, before its processes are looked for."""

    def marked_processes(self):
        """PIDs of the live processes that carry this test's marker."""
        raise NotImplementedError

    def describe_marked(self, pid):
        return describe(pid)

    def lab_leftovers(self):
        """After the marked processes are killed: what else the test left on the lab, in words, or ''."""
        return ""

    def client_env(self):
        """What the lab's clients need in their environment besides PATH and the marker."""
        return {}

    def env(self, **extra):
        """The environment of the clients a test starts: PATH, the marker, client_env() and `extra`; a
        variable set to None is left out."""
        env = {"PATH": BASE_PATH, **self.client_env(), self.marker_name: self.marker_value}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def path(self, *parts):
        return os.path.join(self.dir, *parts)


def main():
    unittest.main(verbosity=2)
