"""distrun under the real MPI launchers of this host, Open MPI's mpirun and MPICH's mpiexec: what each rank
detects from the launcher's variables and from the MPI probe (--cluster-detection-method mpi), PyTorch
workers that meet on the probe's ports, the probe as the fallback for ranks on several hosts, and its errors.

Several hosts are simulated on this one: the launchers reach the second "host" through a stand-in for ssh
that runs the command here in a UTS namespace carrying that host's name, so the launcher, MPI and distrun
all see two hosts; every connection stays on loopback."""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, run  # noqa: E402
from launch_helpers import BASE_PATH, PYTHON, LaunchCase  # noqa: E402

EXAMPLE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch_allreduce.py"))
OPEN_MPI = "mpirun.openmpi"
MPICH = "mpiexec.mpich"
RANK_VARIABLE = {OPEN_MPI: "OMPI_COMM_WORLD_RANK", MPICH: "PMI_RANK"}
SECOND_HOST = "distrun-mpi-test-host2"

# Drops ssh's options, then runs the command in a new UTS namespace named after the target host.
FAKE_SSH = r"""#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -o|-p|-l|-i) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=$1; shift
exec unshare --uts /bin/sh -c 'hostname "$1" && shift && exec /bin/sh -c "$*"' sh "$host" "$*"
"""

HEX_TOKEN = re.compile(r"[0-9a-f]{64}")


class MpiCase(LaunchCase):
    def setUp(self):
        super().setUp()
        self.fake_ssh = self.path("ssh")
        with open(self.fake_ssh, "w") as f:
            f.write(FAKE_SSH)
        os.chmod(self.fake_ssh, 0o755)

    def launcher(self, name, n, hosts=None):
        """The launcher's command line for `n` ranks, on this host or spread evenly over `hosts`."""
        path = shutil.which(name, path=BASE_PATH)
        if path is None:
            self.fail(f"{name} is not installed; run scripts/install-deps.sh")
        if name == OPEN_MPI:
            args = [path, "-np", str(n), "--oversubscribe", "--mca", "btl_tcp_if_include", "lo",
                    "--mca", "oob_tcp_if_include", "lo"]
            if os.geteuid() == 0:
                args.append("--allow-run-as-root")
            if hosts:
                args += ["--host", ",".join(f"{h}:{n // len(hosts)}" for h in hosts),
                         "--mca", "plm_rsh_agent", self.fake_ssh]
        else:
            args = [path, "-n", str(n)]
            if hosts:
                args += ["-hosts", ",".join(f"{h}:{n // len(hosts)}" for h in hosts),
                         "-launcher", "ssh", "-launcher-exec", self.fake_ssh]
        return args

    def launch(self, command, timeout=120, **extra_env):
        """Runs `command` in its own process group with this test's environment; kills the group on timeout."""
        env = {"PATH": BASE_PATH, "HOME": self.dir, "DISTRUN": DISTRUN, **self.env(**extra_env)}
        p = subprocess.Popen(command, env=env, cwd=self.dir, text=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)  # the group this test started
            out, err = p.communicate()
            self.fail(f"{command[0]} did not finish within {timeout}s:\n{out}\n{err}")
        return p.returncode, out, err

    def detect_each_rank(self, name, n, args=(), hosts=None, **extra_env):
        """`LAUNCHER distrun --detect --format json ARGS`; each rank's report, by rank."""
        out_dir = self.path("detect")
        os.makedirs(out_dir, exist_ok=True)
        script = f'exec "$DISTRUN" --detect --format json "$@" > "{out_dir}/${RANK_VARIABLE[name]}.json"'
        rc, out, err = self.launch([*self.launcher(name, n, hosts), "/bin/sh", "-c", script, "sh", *args],
                                   **extra_env)
        self.assertEqual(rc, 0, out + err)
        docs = []
        for rank in range(n):
            with open(os.path.join(out_dir, f"{rank}.json")) as f:
                text = f.read()
            self.assertIsNone(HEX_TOKEN.search(text), "the job token must never be printed")
            docs.append(json.loads(text))
        shutil.rmtree(out_dir)
        return docs

    def assert_ranks(self, docs, method, local_size):
        for rank, doc in enumerate(docs):
            self.assertEqual(doc["method"], method, doc)
            self.assertEqual(doc["launch_mode"], "per-task")
            self.assertEqual(doc["process_id"], rank)
            self.assertEqual(doc["num_processes"], len(docs))
            self.assertEqual(doc["local_rank"], rank % local_size)
            self.assertEqual(doc["local_world_size"], local_size)
            self.assertEqual(doc["workers"][0]["env"]["RANK"], str(rank))
            self.assertEqual(doc["workers"][0]["env"]["WORLD_SIZE"], str(len(docs)))

    def assert_one_choice(self, docs):
        """Everything rank 0 chose reached every rank."""
        for key in ("coordinator_address", "run_id"):
            self.assertEqual(len({doc[key] for doc in docs}), 1, [doc[key] for doc in docs])
        for var in ("MASTER_ADDR", "MASTER_PORT", "JAX_COORDINATOR_ADDRESS", "DISTRUN_COORDINATOR_ADDRESS"):
            values = {doc["workers"][0]["env"][var] for doc in docs}
            self.assertEqual(len(values), 1, f"{var}: {values}")

    def torch_all_reduce(self, name, n, args=(), hosts=None):
        rc, out, err = self.launch([*self.launcher(name, n, hosts), DISTRUN, *args, "--tag-output", "off", "--",
                                    PYTHON, EXAMPLE], timeout=240)
        self.assertEqual(rc, 0, out + err)
        lines = [line for line in out.splitlines() if "all_reduce sum" in line]
        self.assertEqual(len(lines), n, out + err)
        expected = n * (n + 1) // 2
        for rank in range(n):
            self.assertTrue(any(line.startswith(f"rank {rank}/{n} ") and
                                line.endswith(f"sum = {expected} (expected {expected}) OK") for line in lines),
                            out + err)


class OneHost(MpiCase):
    def test_open_mpi_ranks_from_the_launchers_variables(self):
        docs = self.detect_each_rank(OPEN_MPI, 4)
        self.assert_ranks(docs, "ompi", 4)
        for doc in docs:
            self.assertTrue(doc["coordinator_address"].startswith("127.0.0.1:"))

    def test_mpich_ranks_from_the_launchers_variables(self):
        docs = self.detect_each_rank(MPICH, 4)
        self.assert_ranks(docs, "pmi", 4)

    def test_open_mpi_ranks_from_the_probe(self):
        docs = self.detect_each_rank(OPEN_MPI, 4, ["--cluster-detection-method", "mpi"])
        self.assert_ranks(docs, "mpi", 4)
        self.assert_one_choice(docs)
        self.assertEqual(docs[0]["hosts"], [socket.gethostname()])
        self.assertTrue(docs[0]["coordinator_address"].startswith("127.0.0.1:"))

    def test_mpich_ranks_from_the_probe(self):
        docs = self.detect_each_rank(MPICH, 4, ["--cluster-detection-method", "mpi"])
        self.assert_ranks(docs, "mpi", 4)
        self.assert_one_choice(docs)
        self.assertEqual(docs[0]["hosts"], [socket.gethostname()])

    def test_torch_under_open_mpi(self):
        self.torch_all_reduce(OPEN_MPI, 4, ["--cluster-detection-method", "mpi"])

    def test_torch_under_mpich(self):
        self.torch_all_reduce(MPICH, 4, ["--cluster-detection-method", "mpi"])

    def test_torch_under_open_mpi_from_the_launchers_variables(self):
        # Rendezvous through distrun's runtime gives every rank the MASTER_PORT node 0 chose.
        self.torch_all_reduce(OPEN_MPI, 4, [])

    def test_torch_under_mpich_from_the_launchers_variables(self):
        self.torch_all_reduce(MPICH, 4, [])

    def test_mpi_workers_keep_their_rank_without_the_probe(self):
        # On one host distrun never initialises MPI itself, so an MPI program can still be the worker.
        program = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
                   "print('mpi4py', c.rank, c.size, c.allreduce(c.rank + 1), flush=True)")
        rc, out, err = self.launch([*self.launcher(OPEN_MPI, 2), DISTRUN, "--tag-output", "off", "--",
                                    PYTHON, "-c", program])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(line for line in out.splitlines() if line.startswith("mpi4py")),
                         ["mpi4py 0 2 3", "mpi4py 1 2 3"], out + err)


class SeveralHosts(MpiCase):
    """Ranks on two hosts: the launchers' variables do not say which holds rank 0, so the probe runs."""

    def hosts(self):
        return [socket.gethostname(), SECOND_HOST]

    def assert_two_hosts(self, docs, method):
        self.assert_ranks(docs, method, 2)
        self.assert_one_choice(docs)
        here = socket.gethostname()
        for rank, doc in enumerate(docs):
            self.assertEqual(doc["hosts"], [here, SECOND_HOST])
            self.assertEqual(doc["num_nodes"], 2)
            self.assertEqual(doc["node_rank"], rank // 2)
            self.assertTrue(doc["coordinator_address"].startswith(here + ":"), doc["coordinator_address"])
            self.assertEqual(doc["warnings"], [])

    def test_open_mpi_falls_back_to_the_probe(self):
        self.assert_two_hosts(self.detect_each_rank(OPEN_MPI, 4, hosts=self.hosts()), "ompi")

    def test_mpich_falls_back_to_the_probe(self):
        self.assert_two_hosts(self.detect_each_rank(MPICH, 4, hosts=self.hosts()), "pmi")

    def test_named_method_across_hosts(self):
        docs = self.detect_each_rank(MPICH, 4, ["--cluster-detection-method", "mpi"], hosts=self.hosts())
        self.assert_two_hosts(docs, "mpi")

    def test_torch_across_hosts_under_open_mpi(self):
        self.torch_all_reduce(OPEN_MPI, 4, hosts=self.hosts())

    def assert_names_both_fixes(self, line):
        self.assertIn("the pmi ranks span 2+ hosts", line)
        self.assertIn("/nonexistent/libmpi.so.12 (cannot open shared object file", line)
        self.assertIn("--coordinator-address HOST", line)

    def test_fallback_without_mpi_names_both_fixes(self):
        # A launch cannot go on without the coordinator: every rank stops with the one-line error.
        rc, out, err = self.launch([*self.launcher(MPICH, 4, self.hosts()), DISTRUN, "--", "true"],
                                   DISTRUN_MPI_LIBRARY="/nonexistent/libmpi.so.12")
        self.assertNotEqual(rc, 0)
        errors = [line for line in err.splitlines() if line.startswith("distrun: error:")]
        self.assertEqual(len(errors), 4, err)
        for line in errors:
            self.assert_names_both_fixes(line)

    def test_detect_without_mpi_still_says_what_the_variables_say(self):
        docs = self.detect_each_rank(MPICH, 4, hosts=self.hosts(), DISTRUN_MPI_LIBRARY="/nonexistent/libmpi.so.12")
        for rank, doc in enumerate(docs):
            self.assertEqual((doc["method"], doc["launch_mode"]), ("pmi", "per-task"))
            self.assertEqual((doc["process_id"], doc["num_processes"]), (rank, 4))
            self.assertEqual(doc["local_rank"], rank % 2)
            self.assertIsNone(doc["coordinator_address"])
            # The probe's problem, beside the guess that the probe would have replaced.
            self.assertIn("node count 2 is inferred from PMI_SIZE=4", doc["warnings"][0])
            self.assertEqual(len(doc["warnings"]), 2, doc["warnings"])
            self.assert_names_both_fixes(doc["warnings"][1])
            self.assertNotIn("MASTER_ADDR", doc["workers"][0]["env"])
            self.assertEqual(doc["workers"][0]["env"]["RANK"], str(rank))


class ProbeErrors(MpiCase):
    def assert_each_rank_says(self, name, *parts, **extra_env):
        launcher = self.launcher(name, 2)
        if name == OPEN_MPI:
            # Open MPI's mpirun ends the other ranks when one exits non-zero: a rank whose probe is slower would
            # be killed before it said anything.
            launcher += ["--mca", "orte_abort_on_non_zero_status", "0"]
        # mpirun's own exit status then says nothing of the ranks': each rank's is printed.
        rank = ["sh", "-c", '"$0" "$@"; rc=$?; echo "distrun exited $rc" >&2; exit $rc']
        _, out, err = self.launch([*launcher, *rank, DISTRUN, "--detect", "--cluster-detection-method", "mpi"],
                                   **extra_env)
        self.assertEqual(err.count("distrun exited 2\n"), 2, out + err)
        errors = [line for line in err.splitlines() if line.startswith("distrun: error:")]
        self.assertEqual(len(errors), 2, err)
        for line in errors:
            for part in parts:
                self.assertIn(part, line)

    def test_library_that_does_not_exist(self):
        self.assert_each_rank_says(OPEN_MPI, "DISTRUN_MPI_LIBRARY='/nonexistent/libmpi.so.40'",
                                   "no MPI library could be loaded: tried /nonexistent/libmpi.so.40 "
                                   "(cannot open shared object file: No such file or directory)",
                                   "set DISTRUN_MPI_LIBRARY to the path of its libmpi",
                                   DISTRUN_MPI_LIBRARY="/nonexistent/libmpi.so.40")

    def test_library_that_is_not_mpi(self):
        self.assert_each_rank_says(MPICH, "libc.so.6 (no MPI_Get_library_version) is neither Open MPI nor of the "
                                   "MPICH family", DISTRUN_MPI_LIBRARY="libc.so.6")

    def test_the_other_launchers_library(self):
        # MPICH's library under Open MPI's mpirun runs each rank alone: a job of one is not this job.
        self.assert_each_rank_says(OPEN_MPI, "says this is rank 0 of 1 but OMPI_COMM_WORLD_RANK/OMPI_COMM_WORLD_SIZE",
                                   "set DISTRUN_MPI_LIBRARY", DISTRUN_MPI_LIBRARY="libmpich.so.12")

    def test_no_launcher(self):
        r = run(["--detect", "--cluster-detection-method", "mpi"], env=self.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--cluster-detection-method=mpi was named but its environment is absent", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
