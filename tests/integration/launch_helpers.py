"""Helpers for the launch, supervision and output tests: a unique marker per test that every process the
job starts inherits, and the check that no process carrying it is left once distrun has exited."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import uuid

from distrun_harness import DISTRUN

PYTHON = "/usr/bin/python3"
BASE_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def processes_with(entry):
    """PIDs of live processes whose initial environment holds `entry` ("NAME=value")."""
    needle = entry.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env:
            found.append(int(name))
    return found


def describe(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f"{pid}: " + f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return f"{pid}: (gone)"


def sentinel_of(distrun_pid):
    """The distrun-sentinel child of a distrun (it does not carry a test's marker)."""
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{name}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if int(fields[1]) == distrun_pid and comm.startswith("distrun-sentin"):  # comm: 15 characters
            return int(name)
    raise AssertionError(f"no distrun-sentinel child of {distrun_pid}")


def wait_for(predicate, timeout=10.0, interval=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class LaunchCase(unittest.TestCase):
    """Each test gets a marker variable and a scratch directory; afterwards no process may carry the marker."""

    def setUp(self):
        self.marker_name = "DISTRUN_TEST_MARKER"
        self.marker_value = uuid.uuid4().hex
        self.marker = f"{self.marker_name}={self.marker_value}"
        self.dir = tempfile.mkdtemp(prefix="distrun-launch-")
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()  # a distrun this test started and that is still running
            p.communicate()
        left = []
        wait_for(lambda: not processes_with(self.marker), timeout=5)
        left = processes_with(self.marker)
        for pid in left:
            # Each carries this test's unique marker: a process this test started, left behind.
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        self.assertEqual(left, [], "processes of the job outlived distrun:\n" + "\n".join(map(describe, left)))

    def env(self, **extra):
        env = {self.marker_name: self.marker_value}
        env.update(extra)
        return env

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    def popen(self, args, env=None, **kwargs):
        """Starts distrun like distrun_harness.run does (exactly `env` plus PATH), without waiting."""
        full_env = {"PATH": BASE_PATH}
        full_env.update(env if env is not None else self.env())
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        p = subprocess.Popen([DISTRUN] + list(args), env=full_env, text=True, **kwargs)
        self.procs.append(p)
        return p

    def wait_for_files(self, *names, timeout=20.0):
        ok = wait_for(lambda: all(os.path.exists(self.path(n)) for n in names), timeout=timeout)
        self.assertTrue(ok, f"missing after {timeout}s: {[n for n in names if not os.path.exists(self.path(n))]}")

    def no_process_left(self):
        """Asserts now (with a short wait for the kernel to finish) that nothing carries the marker."""
        wait_for(lambda: not processes_with(self.marker), timeout=5)
        left = processes_with(self.marker)
        self.assertEqual(left, [], "processes outlived distrun:\n" + "\n".join(map(describe, left)))
