"""Helpers for the ssh tests: clients run on the lab's login host (sshlogin), each test marks its processes
with a unique value, and afterwards no marked process may remain on any lab host.

The lab must be up (tests/ssh/lab.sh up; tests/ssh/run_tests.sh does it). The lab's hosts share this
machine's file system and process table: a test reads what remote commands write under its scratch
directory, and finds their processes in /proc, each on its host by its network namespace.

A remote command does not inherit the client's environment (the lab's sshd accepts no variables), so a
test puts its marker into the remote command itself: `self.marked(["sleep", "30"])` is
`env DISTRUN_TEST_MARKER=... sleep 30`, whose process carries the marker in its environment. A marker in a
command line is found too. What this shares with the cluster tests' harness is in tests/lab_kit/lab_case.py."""
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lab_kit"))

from lab_case import (BASE_PATH, PYTHON, REPO, LabCase, in_namespaces_of, is_zombie, kill_all, main,  # noqa: E402
                      namespace_inode, recorded_pid)
from distrun_harness import DISTRUN  # noqa: E402
from launch_helpers import describe, wait_for  # noqa: E402

LAB_SH = os.path.join(HERE, "lab.sh")
LAB = os.environ.get("DISTRUN_SSH_LAB_DIR", "/run/distrun-sshlab")
NUM_HOSTS = int(os.environ.get("DISTRUN_SSH_LAB_HOSTS", "3"))
NS_PREFIX = "distrun-ssh-"
LOGIN = "sshlogin"
HOSTS = [f"host{i}" for i in range(1, NUM_HOSTS + 1)]
# Hosts that fail, and how `ssh -o BatchMode=yes -o ConnectTimeout=N HOST` says so (it exits 255).
CLOSED = "hostclosed"    # up, no sshd
SILENT = "hostsilent"    # drops TCP to port 22
NOKEY = "hostnokey"      # an sshd that does not accept the lab's client key
BADKEY = "hostbadkey"    # an sshd whose host key is not the one known_hosts lists
NOWHERE = "hostnowhere"  # resolves nowhere
SSH_ERRORS = {
    CLOSED: f"ssh: connect to host {CLOSED} port 22: Connection refused",
    SILENT: f"ssh: connect to host {SILENT} port 22: Connection timed out",
    NOKEY: f"root@{NOKEY}: Permission denied (publickey).",
    BADKEY: "Host key verification failed.",
    NOWHERE: f"ssh: Could not resolve hostname {NOWHERE}: Temporary failure in name resolution",
}
# Every lab host that has a network namespace, and those that run an sshd.
ALL_HOSTS = [LOGIN, *HOSTS, CLOSED, SILENT, NOKEY, BADKEY]
SSHD_HOSTS = [LOGIN, *HOSTS, NOKEY, BADKEY]
IPS = {LOGIN: "10.98.0.1", **{h: f"10.98.0.{10 + i}" for i, h in enumerate(HOSTS, 1)},
       CLOSED: "10.98.0.200", SILENT: "10.98.0.201", NOKEY: "10.98.0.202", BADKEY: "10.98.0.203"}


def ssh_config_path():
    """The lab's ssh client config: `ssh -F ssh_config_path() HOST` (each lab host also has it as its
    /etc/ssh/ssh_config, so a plain `ssh HOST` there works the same)."""
    return os.path.join(LAB, "ssh", "config")


def ssh_args(host, command=(), options=()):
    """The ssh command line that runs `command` (a list, quoted for the remote shell) on `host`, as a
    script would: no prompts (BatchMode)."""
    args = ["ssh", "-F", ssh_config_path(), "-o", "BatchMode=yes", *options, host]
    if command:
        args.append(shlex.join(command))
    return args


def sshd_pid(host):
    return recorded_pid(LAB, host)


def on_login_host(args):
    """The command line that runs `args` on sshlogin: its network, hostname, /etc/hosts and ssh_config."""
    return on_host(LOGIN, args)


def on_host(host, args):
    """The command line that runs `args` in a lab host's namespaces (those of its sshd; only the network
    namespace for hostclosed and hostsilent, which run nothing)."""
    if host in SSHD_HOSTS:
        return in_namespaces_of(sshd_pid(host), args)
    return ["nsenter", f"--net=/run/netns/{NS_PREFIX}{host}", "--", *args]


def run_on_login(args, timeout=30, env=None, input=None):
    """Runs `args` on sshlogin and waits for it; returns the CompletedProcess (text) whatever its exit code.
    Past `timeout` it is killed and the test fails with what it had said."""
    try:
        return subprocess.run(on_login_host(args), env=env or {"PATH": BASE_PATH}, capture_output=True,
                              text=True, timeout=timeout, input=input,
                              stdin=None if input is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"{shlex.join(args)} on {LOGIN} ran past {timeout}s\n-- stdout:\n{out[-4000:]}\n"
                             f"-- stderr:\n{err[-4000:]}") from None


def popen_on_login(args, env=None, **kwargs):
    """Starts `args` on sshlogin without waiting (stdin /dev/null, stdout and stderr pipes, text)."""
    kwargs.setdefault("stdin", subprocess.DEVNULL)
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    kwargs.setdefault("text", True)
    return subprocess.Popen(on_login_host(args), env=env or {"PATH": BASE_PATH}, **kwargs)


def lab(verb, *args, timeout=60):
    """Runs `tests/ssh/lab.sh VERB ARGS...`; returns the CompletedProcess whatever its exit code."""
    return subprocess.run([LAB_SH, verb, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def cut(host):
    """Takes `host` off the network (lab.sh cut): TCP to and from it stalls, nothing is reset."""
    r = lab("cut", host)
    if r.returncode != 0:
        raise AssertionError(f"lab.sh cut {host} failed: {r.stderr}")


def restore(host):
    """Puts `host` back on the network (lab.sh restore)."""
    r = lab("restore", host)
    if r.returncode != 0:
        raise AssertionError(f"lab.sh restore {host} failed: {r.stderr}")


def is_cut(host):
    r = subprocess.run(["nsenter", f"--net=/run/netns/{NS_PREFIX}{host}", "nft", "list", "tables"],
                       capture_output=True, text=True)
    return "distrun_ssh_cut" in r.stdout.split()


class cut_off:
    """`with cut_off("host2"):` the host is off the network inside the block, back on after it."""

    def __init__(self, host):
        self.host = host

    def __enter__(self):
        cut(self.host)
        return self

    def __exit__(self, *exc):
        restore(self.host)


def netns_inode(host):
    return namespace_inode(f"{NS_PREFIX}{host}")


def host_of(pid):
    """The lab host a process runs on (by its network namespace), or None: not on a lab host, or gone."""
    try:
        ino = os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None
    for host in ALL_HOSTS:
        try:
            if netns_inode(host) == ino:
                return host
        except OSError:
            pass
    return None


def _carries(pid, marker, where):
    """Whether `marker` is in the process's command line (any part of it) or its environment."""
    needle = marker.encode()
    for name in where:
        try:
            with open(f"/proc/{pid}/{name}", "rb") as f:
                if needle in f.read():
                    return True
        except OSError:
            pass
    return False


def processes_on(host, marker, where=("cmdline", "environ")):
    """Live processes on lab host `host` (its network namespace) whose command line or environment holds
    `marker` (`where=("environ",)`: the environment only), the caller left out. A remote command's shell
    (`bash -c 'env M=v cmd'`, which may stay cmd's parent) holds the marker in its command line, cmd in its
    environment."""
    try:
        ino = netns_inode(host)
    except OSError:
        return []
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            if os.stat(f"/proc/{name}/ns/net").st_ino != ino:
                continue
        except OSError:
            continue
        if _carries(name, marker, where) and not is_zombie(int(name)):
            found.append(int(name))
    return found


def count_on(host, marker, where=("cmdline", "environ")):
    return len(processes_on(host, marker, where))


def processes_everywhere(marker, hosts=None):
    """{host: [pid, ...]} for every lab host with a process that holds `marker`."""
    found = {h: processes_on(h, marker) for h in (hosts or ALL_HOSTS)}
    return {h: pids for h, pids in found.items() if pids}


def kill_on(host, marker, sig=signal.SIGKILL):
    """Sends `sig` to every process on `host` that holds `marker`; returns their PIDs."""
    pids = processes_on(host, marker)
    kill_all(pids, sig)
    return pids


def wait_for_count(host, marker, count, timeout=10.0, where=("cmdline", "environ")):
    """Waits until exactly `count` processes on `host` hold `marker`; returns whether they did."""
    return wait_for(lambda: count_on(host, marker, where) == count, timeout=timeout)


def lab_is_up():
    try:
        return all(not is_zombie(sshd_pid(h)) for h in SSHD_HOSTS)
    except (OSError, ValueError):
        return False


class SshCase(LabCase):
    """Each test gets a marker (DISTRUN_TEST_MARKER=dt-...) that its local clients carry in their
    environment and that `marked()` puts into remote commands, and a scratch directory under the lab that
    every host sees. Afterwards: no cut host, and no process on any lab host holds the marker."""
    LAB = LAB
    LAB_NAME = "the ssh lab"
    RUN_TESTS = "tests/ssh/run_tests.sh"
    lab_is_up = staticmethod(lab_is_up)

    def settle_lab(self):
        for host in ALL_HOSTS:
            if is_cut(host):
                restore(host)

    # A remote command does not end with its ssh client (no terminal, no SIGHUP): whatever a test left on a
    # host is killed by tearDown, and the test fails saying what it was.
    def marked_processes(self):
        return [pid for pids in processes_everywhere(self.marker_value).values() for pid in pids]

    def describe_marked(self, pid):
        return f"{host_of(pid)}: {describe(pid)}"

    def lab_leftovers(self):
        wait_for(lambda: not processes_everywhere(self.marker_value), timeout=5)
        return ""

    def marked(self, command):
        """`command` (a list) to run remotely with this test's marker in its environment."""
        return ["env", self.marker, *command]

    def login(self, args, timeout=30, env=None, input=None):
        """Runs `args` on sshlogin with this test's environment and waits for it."""
        return run_on_login(args, timeout=timeout, env=env or self.env(), input=input)

    def login_popen(self, args, env=None, **kwargs):
        """Starts `args` on sshlogin; tearDown kills it if it still runs."""
        p = popen_on_login(args, env=env or self.env(), **kwargs)
        self.procs.append(p)
        return p

    def ssh(self, host, command, options=(), timeout=30):
        """Runs `command` (a list, marked) on `host` over ssh from sshlogin; returns the CompletedProcess."""
        return self.login(ssh_args(host, self.marked(command), options), timeout=timeout)

    def timed(self, fn):
        start = time.monotonic()
        result = fn()
        return result, time.monotonic() - start


class DistrunSshCase(SshCase):
    """An SshCase that runs distrun (DISTRUN_BIN, set by run_tests.sh from its BUILD_DIR): fails, not skips,
    without one, so that a missing build never passes for a green run."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.access(DISTRUN, os.X_OK):
            raise AssertionError(f"no distrun at {DISTRUN}: build it first (tests/ssh/run_tests.sh BUILD_DIR)")

    def setUp(self):
        super().setUp()
        # distrun as the hosts see it: the same binary, by a path that names this test, so that every
        # distrun of the test carries its marker in its command line (--remote-distrun self.remote)
        os.makedirs(self.path("bin"))
        self.remote = self.path("bin", "distrun")
        os.symlink(DISTRUN, self.remote)

    def left(self):
        return processes_everywhere(self.marker_value)

    def assert_nothing_left(self, timeout=10):
        wait_for(lambda: not self.left(), timeout=timeout)
        left = self.left()
        self.assertEqual(left, {}, "\n".join(f"{h}: {describe(p)}" for h, pids in left.items() for p in pids))


__all__ = ["ALL_HOSTS", "BADKEY", "BASE_PATH", "CLOSED", "DISTRUN", "DistrunSshCase", "HOSTS", "IPS", "LAB",
           "LAB_SH", "LOGIN", "NOKEY", "NOWHERE", "NUM_HOSTS", "PYTHON", "REPO", "SILENT", "SSHD_HOSTS",
           "SSH_ERRORS", "SshCase", "count_on", "cut", "cut_off", "describe", "host_of", "is_cut", "kill_on",
           "lab", "lab_is_up", "main", "on_host", "on_login_host", "popen_on_login", "processes_everywhere",
           "processes_on", "restore", "run_on_login", "ssh_args", "ssh_config_path", "sshd_pid", "wait_for",
           "wait_for_count"]
