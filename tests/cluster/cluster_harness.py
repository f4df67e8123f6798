"""Helpers for the cluster tests: Slurm clients run on the lab's login host (labctl), jobs are found by a
per-test marker, and after each test no process of the test's jobs may remain on any virtual host.

The lab must be up (tests/cluster/lab.sh up; tests/cluster/run_tests.sh does it). The lab's hosts share
this machine's file system and process table, so a test reads what jobs write under its scratch directory
and finds their processes in /proc. What this shares with the ssh tests' harness is in
tests/lab_kit/lab_case.py."""
import json
import os
import re
import subprocess
import sys
import unittest
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "lab_kit"))

from lab_case import (BASE_PATH, PYTHON, REPO, LabCase, in_namespaces_of, is_zombie, main,  # noqa: E402
                      namespace_inode, recorded_pid)
from distrun_harness import DISTRUN  # noqa: E402
from launch_helpers import describe, processes_with, wait_for  # noqa: E402

LAB = os.environ.get("DISTRUN_LAB_DIR", "/run/distrun-lab")
SLURM_CONF = os.path.join(LAB, "etc", "slurm.conf")
NUM_NODES = int(os.environ.get("DISTRUN_LAB_NODES", "3"))
GPUS_PER_NODE = int(os.environ.get("DISTRUN_LAB_GPUS", "4"))
NODES = [f"node{i}" for i in range(1, NUM_NODES + 1)]


def _pid_file(name):
    return recorded_pid(LAB, name)


def on_login_host(args):
    """The command line that runs `args` on labctl: its network, hostname and /etc/hosts."""
    return in_namespaces_of(_pid_file("slurmctld"), args)


def on_node(node, args):
    """The command line that runs `args` in a virtual host's namespaces (those of its slurmd)."""
    return in_namespaces_of(_pid_file(node), args)


def node_processes(node):
    """Live processes on a virtual host other than its slurmd: what jobs left there."""
    r = subprocess.run(["ip", "netns", "pids", f"distrun-lab-{node}"], capture_output=True, text=True)
    slurmd = _pid_file(node)
    return [int(p) for p in r.stdout.split() if int(p) != slurmd and not is_zombie(int(p))]


def lab_is_up():
    try:
        return all(os.path.exists(f"/proc/{_pid_file(n)}") for n in ["slurmctld", "munged", *NODES])
    except OSError:
        return False


def distrun_has_job_runtime():
    """Whether this distrun joins the nodes of a job: it knows --heartbeat-timeout and two nodes agree on
    MASTER_PORT (chosen by node 0). Returns (bool, why)."""
    help_text = subprocess.run([DISTRUN, "--help"], capture_output=True, text=True).stdout
    if "--heartbeat-timeout" not in help_text:
        return False, "distrun --help does not list --heartbeat-timeout"
    env = {"PATH": BASE_PATH, "SLURM_CONF": SLURM_CONF}
    try:
        r = subprocess.run(on_login_host(["srun", "-N2", "--ntasks-per-node=1", "-J", "distrun-feature-probe",
                                          DISTRUN, "--nproc-per-node", "1", "--tag-output", "off", "--",
                                          "/bin/sh", "-c", 'echo "port=$MASTER_PORT"']),
                           env=env, capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        subprocess.run(on_login_host(["scancel", "--name", "distrun-feature-probe"]), env=env)
        return False, "a two-node srun distrun did not finish within 30 s"
    ports = set(re.findall(r"port=(\d*)", r.stdout))
    if r.returncode != 0 or len(ports) != 1:
        return False, (f"two nodes of one srun step got MASTER_PORT {sorted(ports)} (rc {r.returncode}): each "
                       "distrun still plans its own node alone")
    return True, ""


class ClusterCase(LabCase):
    """Each test gets a marker variable (also its Slurm job name) and a scratch directory that every host
    sees. Afterwards: the test's jobs are gone, no process carries the marker, and every virtual host runs
    only its slurmd."""
    LAB = LAB
    LAB_NAME = "the Slurm lab"
    RUN_TESTS = "tests/cluster/run_tests.sh"
    MARKED_GRACE = 15
    MARKED_OWNER = "the job"
    lab_is_up = staticmethod(lab_is_up)

    def settle_lab(self):
        self.slurm(["scancel", "--name", self.marker_value], check=False)
        # A host whose task ended while its link was down (the elastic tests cut links) has a slurmstepd that
        # failed to send the step's completion and tries again 60 s later ("Rank 2 failed sending step
        # completion message directly to slurmctld, retrying"): the job stays COMPLETING until then.
        self.assertTrue(wait_for(lambda: not self.jobs(), timeout=90), f"jobs left: {self.jobs()}")
        self.resume_drained()

    def marked_processes(self):
        return processes_with(self.marker)

    def lab_leftovers(self):
        wait_for(lambda: not any(node_processes(n) for n in NODES), timeout=15)
        on_hosts = {n: node_processes(n) for n in NODES}
        if not any(on_hosts.values()):
            return ""
        return "processes left on the hosts:\n" + "\n".join(
            f"{n}: {describe(p)}" for n, pids in on_hosts.items() for p in pids)

    def resume_drained(self):
        """A host whose slurmstepd could not report its step's end (a test made its link lossy or cut it)
        is drained by Slurm ("Kill task failed"), and every later -N3 job would wait for it: the lab's
        Slurm is put right, and says so. Processes left behind are tearDown's to find, not this."""
        r = self.slurm(["sinfo", "-h", "-N", "-t", "drained,draining", "-o", "%N|%E"], check=False)
        for line in r.stdout.splitlines():
            node, _, reason = line.partition("|")
            if "Kill task failed" in reason:
                print(f"note: Slurm drained {node} ({reason}); resuming it", file=sys.stderr)
                self.slurm(["scontrol", "update", f"nodename={node}", "state=resume"], check=False)

    # -- clients on the login host ------------------------------------------------------------------------

    def client_env(self):
        """srun and sbatch pass the clients' environment on to the job. Every node of a job shares a token,
        as distrun advises for multi-node jobs; `env(DISTRUN_TOKEN=None)` leaves it out."""
        return {"SLURM_CONF": SLURM_CONF, "DISTRUN_TOKEN": uuid.uuid4().hex}

    def slurm(self, args, timeout=60, check=True, env=None):
        """Runs a Slurm client (or anything) on labctl and waits for it."""
        r = subprocess.run(on_login_host(args), env=env or self.env(), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        if check and r.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
        return r

    def srun(self, args, timeout=120, env=None):
        """srun with this test's job name; returns the CompletedProcess whatever its exit code."""
        return self.slurm(["srun", "-J", self.marker_value, *args], timeout=timeout, check=False, env=env)

    def srun_popen(self, args, env=None):
        p = subprocess.Popen(on_login_host(["srun", "-J", self.marker_value, *args]), env=env or self.env(),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        return p

    def sbatch(self, script, args=()):
        path = self.path("job.sh")
        with open(path, "w") as f:
            f.write(script)
        os.chmod(path, 0o755)
        r = self.slurm(["sbatch", "--parsable", "-J", self.marker_value, "-o", self.path("slurm-%j.out"),
                        *args, path])
        return r.stdout.strip().split(";")[0]

    def jobs(self):
        r = self.slurm(["squeue", "-h", "--name", self.marker_value, "-o", "%i"], check=False)
        return r.stdout.split()

    def wait_job(self, job_id, timeout=120):
        """Polls squeue until the job has left the queue; returns scontrol's fields for it."""
        gone = wait_for(lambda: not self.slurm(["squeue", "-h", "-j", job_id], check=False).stdout.strip(),
                        timeout=timeout, interval=0.05)
        self.assertTrue(gone, f"job {job_id} still queued after {timeout}s")
        r = self.slurm(["scontrol", "show", "job", "-o", job_id])
        return dict(field.split("=", 1) for field in r.stdout.split() if "=" in field)

    # -- files --------------------------------------------------------------------------------------------

    def read(self, name):
        with open(self.path(name)) as f:
            return f.read()

    def read_json(self, name):
        text = self.read(name)
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise AssertionError(f"{name} is not JSON ({e}):\n{text}")

    def wait_for_files(self, names, timeout=60.0, proc=None):
        """Waits until every file exists. On failure `proc` (a running srun) is stopped and its output is
        part of the message: what the job said is the first thing to know."""
        ok = wait_for(lambda: all(os.path.exists(self.path(n)) for n in names), timeout=timeout)
        if ok:
            return
        missing = [n for n in names if not os.path.exists(self.path(n))]
        said = ""
        if proc is not None:
            self.slurm(["scancel", "--name", self.marker_value], check=False)
            try:
                out, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            said = f"\n-- srun exited {proc.returncode}; stdout:\n{out}\n-- stderr:\n{err}"
        self.fail(f"missing after {timeout}s: {missing}{said}")


def netns_inode(node):
    return namespace_inode(f"distrun-lab-{node}")


def script_pids_on(node, marker, script):
    """The processes of a test's job on one virtual host that run `python script` (its workers; distrun's own
    command line names the script too, but not as its first argument)."""
    found = []
    for pid in processes_with(marker):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                runs_script = f.read().split(b"\0")[1:2] == [script.encode()]
            if runs_script and os.stat(f"/proc/{pid}/ns/net").st_ino == netns_inode(node):
                found.append(pid)
        except OSError:
            pass
    return found


def distrun_pids_on(node, marker):
    """The distrun processes of a test's job that run on one virtual host (not their sentinels, which run
    the same executable under another name)."""
    exe = os.path.realpath(DISTRUN)
    found = []
    for pid in processes_with(marker):
        try:
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
            if (comm == "distrun" and os.path.realpath(f"/proc/{pid}/exe") == exe
                    and os.stat(f"/proc/{pid}/ns/net").st_ino == netns_inode(node)):
                found.append(pid)
        except OSError:
            pass
    return found


class JobRuntimeCase(ClusterCase):
    """A ClusterCase whose jobs need every distrun of a job to join node 0's runtime; skipped, saying why,
    with a distrun that does not."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        ok, why = distrun_has_job_runtime()
        if not ok:
            raise unittest.SkipTest("distrun does not join the nodes of a job yet: " + why)


__all__ = ["ClusterCase", "DISTRUN", "GPUS_PER_NODE", "LAB", "NODES", "NUM_NODES", "PYTHON", "REPO", "SLURM_CONF",
           "distrun_has_job_runtime", "script_pids_on", "is_zombie", "lab_is_up", "main", "node_processes", "on_login_host", "on_node", "processes_with",
           "wait_for"]
