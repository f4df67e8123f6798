"""Job-wide supervision across the lab's virtual hosts: every distrun of a job is an agent of the
coordination service that node 0's distrun hosts. Ports are agreed on all nodes, a failure on one node
stops every node, and a lost node ends the job everywhere.

Skipped, with the reason, when this distrun does not join the nodes of a job yet (see
cluster_harness.distrun_has_job_runtime)."""
import os
import re
import shutil
import signal
import subprocess

from cluster_harness import DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, distrun_pids_on, main, wait_for

TORCH_ALLREDUCE = os.path.join(REPO, "examples", "torch_allreduce.py")
# A bound on how long a job-wide stop may take before the test gives up; the workers themselves would
# otherwise run for this long, so a job that is not stopped fails instead of passing late.
STOP_BOUND = 60
WORKER_LIFETIME = 600


class JobRuntime(JobRuntimeCase):
    def lines_naming(self, host, text):
        return [line for line in text.splitlines() if re.search(rf"\b{host}\b", line)]

    def worker_script(self, body):
        """A worker that says it is ready, then runs `body` (bash)."""
        path = self.path("worker.sh")
        with open(path, "w") as f:
            f.write(f"""#!/bin/bash
echo "$(hostname)" > {self.dir}/ready-$RANK
{body}
""")
        os.chmod(path, 0o755)
        return path

    def check_allreduce(self, out, world):
        lines = [line for line in out.splitlines() if "all_reduce" in line]
        self.assertEqual(len(lines), world, out)
        ranks = sorted(int(re.search(r"rank (\d+)/", line).group(1)) for line in lines)
        self.assertEqual(ranks, list(range(world)), out)
        expected = world * (world + 1) // 2
        for line in lines:
            self.assertIn(f"/{world} ", line)
            self.assertIn(f"sum = {expected} (expected {expected}) OK", line)
        # Every worker was handed the same MASTER_ADDR:MASTER_PORT, chosen by node 0.
        masters = {re.search(r" on (\S+): all_reduce", line).group(1) for line in lines}
        self.assertEqual(len(masters), 1, masters)
        self.assertTrue(masters.pop().startswith("node1:"), out)

    def test_one_distrun_per_host_runs_two_torch_workers_each(self):
        r = self.srun([f"-N{len(NODES)}", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", "2", "--",
                       PYTHON, TORCH_ALLREDUCE], timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_allreduce(r.stdout, 2 * len(NODES))

    def test_workers_reach_a_distrun_started_by_its_path(self):
        # /opt/x/bin/distrun in an srun step, not on PATH: the workers' scripts still run `distrun kv`.
        bin_dir = self.path("opt", "bin")
        os.makedirs(bin_dir)
        for name in ("distrun", "distrun-sentinel", "distrun-runtime.so"):
            shutil.copy2(os.path.join(os.path.dirname(DISTRUN), name), bin_dir)
        program = os.path.join(bin_dir, "distrun")
        r = self.srun(["-N2", "--ntasks-per-node=1", program, "--nproc-per-node", "2", "--tag-output", "off", "--",
                       "sh", "-c", 'distrun kv set "k/$DISTRUN_PROCESS_ID" x && distrun barrier b && '
                       'echo "$DISTRUN_PROCESS_ID $(distrun kv ls k/ | wc -l) $(command -v distrun)"'])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), [f"{rank} 4 {program}" for rank in range(4)])

    def test_commands_against_an_ended_job_fail_at_once(self):
        # The job's address and token, as a user would have copied them from a worker.
        r = self.srun(["-N2", "--ntasks-per-node=1", DISTRUN, "--tag-output", "off", "--", "sh", "-c",
                       '[ "$DISTRUN_PROCESS_ID" = 0 ] && echo "$DISTRUN_COORDINATOR_ADDRESS $DISTRUN_TOKEN"; true'])
        self.assertEqual(r.returncode, 0, r.stderr)
        address, token = r.stdout.split()
        env = self.env(DISTRUN_COORDINATOR_ADDRESS=address, DISTRUN_TOKEN=token)
        for verb in (["kv", "get", "k"], ["status"]):
            done = self.slurm([DISTRUN, *verb], env=env, check=False, timeout=20)
            self.assertEqual(done.returncode, 3, done.stderr)
            self.assertRegex(done.stderr, rf"^distrun: {' '.join(verb[:2]) if verb[0] == 'kv' else 'status'}: "
                                          rf"cannot reach the distrun runtime at {re.escape(address)}: .*; "
                                          r"is the job still running\?\n$")

    def test_one_distrun_per_task_runs_one_torch_worker_each(self):
        r = self.srun(["-N2", "--ntasks-per-node=2", DISTRUN, "--", PYTHON, TORCH_ALLREDUCE], timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.check_allreduce(r.stdout, 4)

    def test_worker_exit_on_the_last_host_stops_every_host(self):
        n = len(NODES)
        failing_rank = 2 * (n - 1)  # local rank 0 on the last host
        script = self.worker_script(f"""
if [ "$RANK" = {failing_rank} ]; then
  # Fail once every worker of the job is running.
  while [ "$(ls {self.dir} | grep -c '^ready-')" -lt {2 * n} ]; do sleep 0.05; done
  echo "worker $RANK fails" >&2
  exit 9
fi
sleep {WORKER_LIFETIME}
""")
        r = self.srun([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN,
                       "--nproc-per-node", "2", "--grace-period", "5", "--", script], timeout=STOP_BOUND)
        errors = {t: self.read(f"{t}.err") for t in range(n)}
        self.assertEqual(r.returncode, 9, f"{r.stdout}\n{errors}")
        # Every node says why it stopped: the root cause, its rank and its host on one line.
        for t in range(n):
            self.assertTrue(any(re.search(rf"\brank {failing_rank}\b", line)
                                for line in self.lines_naming(NODES[-1], errors[t])), f"task {t}:\n{errors[t]}")
        # tearDown checks that no process remains on any host.

    def test_sigkill_of_one_distrun_ends_the_job_everywhere(self):
        n = len(NODES)
        script = self.worker_script(f"sleep {WORKER_LIFETIME}")
        p = self.srun_popen([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN,
                             "--nproc-per-node", "2", "--grace-period", "5", "--", script])
        self.wait_for_files([f"ready-{r}" for r in range(2 * n)], proc=p)
        [victim] = distrun_pids_on(NODES[1], self.marker)
        os.kill(victim, signal.SIGKILL)
        out, err = p.communicate(timeout=STOP_BOUND)
        self.assertNotEqual(p.returncode, 0, out + err)
        # The other nodes stopped because their distrun saw node2's go (srun itself waits for every task).
        for t in [0, *range(2, n)]:
            text = self.read(f"{t}.err")
            self.assertTrue(self.lines_naming(NODES[1], text), f"task {t} does not name the lost host:\n{text}")

    def test_lost_coordinator_host_ends_the_job_on_the_others(self):
        n = len(NODES)
        script = self.worker_script(f"sleep {WORKER_LIFETIME}")
        p = self.srun_popen([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN,
                             "--nproc-per-node", "1", "--heartbeat-timeout", "2", "--grace-period", "5", "--",
                             script])
        self.wait_for_files([f"ready-{r}" for r in range(n)], proc=p)
        link = ["nsenter", f"--net=/run/netns/distrun-lab-{NODES[0]}", "ip", "link", "set", "eth0"]
        subprocess.run(link + ["down"], check=True)
        try:
            # srun cannot hear from node1 either, so watch the other hosts' distruns end.
            others_done = wait_for(lambda: not any(distrun_pids_on(node, self.marker) for node in NODES[1:]),
                                   timeout=STOP_BOUND)
        finally:
            subprocess.run(link + ["up"], check=True)
        self.assertTrue(others_done, "distrun still runs on the hosts that lost the coordinator")
        for t in range(1, n):
            err = self.read(f"{t}.err")
            self.assertTrue(self.lines_naming(NODES[0], err), f"task {t} does not name the lost host:\n{err}")
        try:
            p.communicate(timeout=STOP_BOUND)
        except subprocess.TimeoutExpired:
            pass  # tearDown cancels the job and checks that nothing of it remains


if __name__ == "__main__":
    main()
