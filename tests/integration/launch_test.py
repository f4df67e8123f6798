"""`distrun -- COMMAND` starts the planned workers: the environment contract, per-node and per-task mode,
stdin, and commands that cannot run. After every test no process of the job may remain."""
import json
import os
import pty
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, run  # noqa: E402
from launch_helpers import PYTHON, LaunchCase, wait_for  # noqa: E402

CONTRACT = ["DISTRUN_PROCESS_ID", "DISTRUN_NUM_PROCESSES", "DISTRUN_LOCAL_RANK", "DISTRUN_LOCAL_WORLD_SIZE",
            "DISTRUN_NODE_RANK", "DISTRUN_NUM_NODES", "DISTRUN_LOCAL_DEVICE_IDS", "DISTRUN_COORDINATOR_ADDRESS",
            "DISTRUN_RUN_ID", "DISTRUN_RESTART_COUNT", "DISTRUN_CLUSTER", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
            "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT",
            "TORCHELASTIC_MAX_RESTARTS", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS",
            "JAX_COORDINATOR_ADDRESS", "KERAS_DISTRIBUTION_JOB_ADDRESSES", "KERAS_DISTRIBUTION_NUM_PROCESSES",
            "KERAS_DISTRIBUTION_PROCESS_ID"]
# Chosen free by each distrun invocation (rendezvous will fix them job-wide), so a dry run and a launch differ.
FRESH_PORTS = {"MASTER_PORT"}

# Writes the worker's whole environment to DIR/env-<RANK>.json.
DUMP_ENV = ("import json, os, sys; "
            "open(os.path.join(sys.argv[1], 'env-%s.json' % os.environ['DISTRUN_PROCESS_ID']), 'w')"
            ".write(json.dumps(dict(os.environ)))")


class Contract(LaunchCase):
    def launch_and_plan(self, options, env):
        """Runs the env-dumping worker under `options` and returns (worker envs by rank, the dry-run plan)."""
        r = run([*options, "--", PYTHON, "-c", DUMP_ENV, self.dir], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        plan = run(["--dry-run", "--format", "json", *options, "--", PYTHON, "-c", DUMP_ENV, self.dir], env=env)
        self.assertEqual(plan.returncode, 0, plan.stderr)
        plan = json.loads(plan.stdout)
        envs = {}
        for name in os.listdir(self.dir):
            with open(self.path(name)) as f:
                env_doc = json.load(f)
            envs[int(env_doc["DISTRUN_PROCESS_ID"])] = env_doc
        return envs, plan

    def assert_agree(self, envs, plan):
        self.assertEqual(sorted(envs), sorted(w["process_id"] for w in plan["workers"]))
        for worker in plan["workers"]:
            got = envs[worker["process_id"]]
            for name, value in worker["env"].items():
                self.assertIn(name, got, f"rank {worker['process_id']} lacks {name}")
                if name not in FRESH_PORTS:
                    self.assertEqual(got[name], value, f"rank {worker['process_id']}: {name}")
            for name in CONTRACT:
                self.assertIn(name, got, f"rank {worker['process_id']} lacks contract variable {name}")
            # Everything else is inherited from distrun.
            self.assertEqual(got[self.marker_name], self.marker_value)
        self.assertEqual(len({e["MASTER_PORT"] for e in envs.values()}), 1, "one MASTER_PORT for the job")
        for e in envs.values():
            self.assertTrue(1 <= int(e["MASTER_PORT"]) <= 65535)

    def test_per_node_workers_get_the_planned_environment(self):
        options = ["--nproc-per-node", "3", "--run-id", "contract-test", "--coordinator-port", "61999"]
        envs, plan = self.launch_and_plan(options, self.env(JAX_COORDINATOR_PORT="61998"))
        self.assertEqual(plan["launch_mode"], "per-node")
        self.assertEqual(len(envs), 3)
        self.assert_agree(envs, plan)
        self.assertEqual([envs[r]["LOCAL_RANK"] for r in range(3)], ["0", "1", "2"])
        self.assertEqual({envs[r]["WORLD_SIZE"] for r in range(3)}, {"3"})
        self.assertEqual({envs[r]["DISTRUN_RESTART_COUNT"] for r in range(3)}, {"0"})
        self.no_process_left()

    def test_per_task_mode_runs_one_worker_as_the_given_process(self):
        common = ["--cluster-detection-method", "deactivate", "--num-processes", "4",
                  "--coordinator-address", "127.0.0.1:61997", "--run-id", "per-task-test"]
        env = self.env(JAX_COORDINATOR_PORT="61996")
        # The job's other three processes: rendezvous needs every one.
        peers_dir = tempfile.mkdtemp(prefix="distrun-peers-")
        self.addCleanup(shutil.rmtree, peers_dir, ignore_errors=True)
        peers = [self.popen([*common, "--process-id", str(i), "--", PYTHON, "-c", DUMP_ENV, peers_dir], env=env)
                 for i in (0, 1, 3)]
        envs, plan = self.launch_and_plan([*common, "--process-id", "2"], env)
        for peer in peers:
            out, err = peer.communicate(timeout=30)
            self.assertEqual(peer.returncode, 0, err)
        self.assertEqual(sorted(os.listdir(peers_dir)), ["env-0.json", "env-1.json", "env-3.json"])
        self.assertEqual(plan["launch_mode"], "per-task")
        self.assertEqual(list(envs), [2])
        self.assert_agree(envs, plan)
        self.assertEqual(envs[2]["RANK"], "2")
        self.assertEqual(envs[2]["WORLD_SIZE"], "4")
        self.assertEqual(envs[2]["DISTRUN_COORDINATOR_ADDRESS"], "127.0.0.1:61997")

    def test_plan_overrides_inherited_values_and_keeps_the_rest(self):
        r = run(["--", "sh", "-c", "echo $RANK $OMP_NUM_THREADS $KEEP"],
                env=self.env(RANK="77", OMP_NUM_THREADS="8", KEEP="kept"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "0 8 kept\n")

    def test_worker_path_lookup_uses_the_workers_path(self):
        tool = self.path("distrun-test-tool")
        with open(tool, "w") as f:
            f.write("#!/bin/sh\necho tool ran\n")
        os.chmod(tool, 0o755)
        r = run(["--", "distrun-test-tool"], env=self.env(PATH=self.dir + ":/usr/bin:/bin"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "tool ran\n")


class Commands(LaunchCase):
    def test_exit_code_of_a_single_worker(self):
        self.assertEqual(run(["--", "true"], env=self.env()).returncode, 0)
        r = run(["--", "sh", "-c", "exit 42"], env=self.env())
        self.assertEqual(r.returncode, 42)

    def test_command_not_found_exits_127(self):
        r = run(["--nproc-per-node", "2", "--", "distrun-no-such-command", "x"], env=self.env())
        self.assertEqual(r.returncode, 127, r.stderr)
        self.assertIn("distrun: error: distrun-no-such-command: not found", r.stderr)
        self.assertEqual(r.stderr.count("not found"), 1, "one line, not one per worker: " + r.stderr)
        r = run(["--", self.path("missing")], env=self.env())
        self.assertEqual(r.returncode, 127, r.stderr)

    def test_not_executable_exits_126(self):
        script = self.path("script.sh")
        with open(script, "w") as f:
            f.write("#!/bin/sh\necho hi\n")
        os.chmod(script, 0o644)
        r = run(["--", script], env=self.env())
        self.assertEqual(r.returncode, 126, r.stderr)
        self.assertIn(f"distrun: error: {script}: permission denied", r.stderr)
        self.assertIn("chmod +x", r.stderr)
        r = run(["--", self.dir], env=self.env())
        self.assertEqual(r.returncode, 126, r.stderr)
        self.assertIn("is a directory", r.stderr)

    def test_no_command_exits_2(self):
        r = run([], env=self.env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("no command to run", r.stderr)

    def test_verbose_shows_distruns_debug_messages(self):
        r = run(["-v", "--", "true"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("distrun: debug: started rank 0", r.stderr)
        r = run(["-v", "--log-level", "warn", "--", "true"], env=self.env())
        self.assertEqual(r.stderr, "", "an explicit --log-level wins over -v")

    def test_command_from_the_config_file(self):
        with open(self.path("distrun.yaml"), "w") as f:
            f.write("nproc_per_node: 2\ncommand: [sh, -c, 'echo from config $RANK']\ntag_output: 'off'\n")
        r = run([], env=self.env(), cwd=self.dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), ["from config 0", "from config 1"])

    def test_stdin_goes_to_rank_0_only(self):
        r = subprocess.run(
            [DISTRUN, "--nproc-per-node", "3", "--", "sh", "-c", "echo $RANK:$(cat)"],
            input="hello\n", capture_output=True, text=True, timeout=30,
            env={"PATH": "/usr/bin:/bin", self.marker_name: self.marker_value})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), ["[0] 0:hello", "[1] 1:", "[2] 2:"])


class Terminal(LaunchCase):
    """distrun started on a terminal, as from an interactive shell: rank 0 gets the terminal."""

    def start(self, *args):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", self.marker_name: self.marker_value}
        pid, fd = pty.fork()
        if pid == 0:
            try:
                os.execve(DISTRUN, [DISTRUN, *args], env)
            finally:
                os._exit(127)
        self.pty_pid, self.pty_fd, self.pty_out = pid, fd, b""
        return pid

    def read_until(self, text, timeout=20.0):
        deadline = time.monotonic() + timeout
        while text.encode() not in self.pty_out and time.monotonic() < deadline:
            ready, _, _ = select.select([self.pty_fd], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(self.pty_fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                self.pty_out += chunk
        return text.encode() in self.pty_out

    def finish(self):
        self.read_until("\0", timeout=5)  # drain until distrun closes the terminal
        _, status = os.waitpid(self.pty_pid, 0)
        os.close(self.pty_fd)
        return os.waitstatus_to_exitcode(status)

    def state(self):
        with open(f"/proc/{self.pty_pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def test_rank_0_reads_the_terminal(self):
        self.start("--nproc-per-node", "2", "--", "sh", "-c", 'if [ "$RANK" = 0 ]; then read x; echo "got $x"; fi')
        time.sleep(0.3)
        os.write(self.pty_fd, b"hello\n")
        self.assertTrue(self.read_until("got hello"), self.pty_out)
        self.assertEqual(self.finish(), 0, self.pty_out)

    def test_ctrl_c_goes_to_rank_0_and_ends_the_job(self):
        self.start("--nproc-per-node", "2", "--", "sh", "-c", f"touch {self.dir}/ready-$RANK; exec sleep 60")
        self.wait_for_files("ready-0", "ready-1")
        os.write(self.pty_fd, b"\x03")
        self.assertEqual(self.finish(), 130, self.pty_out)
        self.assertIn(b"signal SIGINT", self.pty_out)

    def test_ctrl_z_stops_the_job_and_sigcont_resumes_it(self):
        self.start("--", "sh", "-c", f'touch {self.dir}/ready-0; read x; echo "got $x"')
        self.wait_for_files("ready-0")
        os.write(self.pty_fd, b"\x1a")
        self.assertTrue(wait_for(lambda: self.state() == "T"), "distrun stops like a job stopped with Ctrl-Z")
        os.kill(self.pty_pid, signal.SIGCONT)  # what `fg` does
        self.assertTrue(wait_for(lambda: self.state() != "T"))
        time.sleep(0.2)
        os.write(self.pty_fd, b"again\n")
        self.assertTrue(self.read_until("got again"), self.pty_out)
        self.assertEqual(self.finish(), 0, self.pty_out)


if __name__ == "__main__":
    unittest.main(verbosity=2)
