"""Recovering in place (--recovery in-process) across the lab's virtual hosts, with real PyTorch workers (gloo)
that train in a loop (tests/integration/inprocess_worker.py: every rank's state must agree after every step,
and a recovery takes the state and the step from the world's source). A host's distrun killed (with a warm
spare, and under resize), a worker killed, a worker that exits non-zero, a host frozen, its link cut, node 0
lost, and 20 faults back to back: each time the survivors keep their processes, every rank's state is the same
at every step, no step is lost beyond the one in flight, and nothing of the job is left (tearDown checks every
host)."""
import collections
import os
import signal
import subprocess
import sys

from cluster_harness import DISTRUN, NODES, REPO, JobRuntimeCase, distrun_pids_on, main, script_pids_on, wait_for

sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from python_workers import module_env, python_command  # noqa: E402

WORKER = os.path.join(REPO, "tests", "integration", "inprocess_worker.py")
BOUND = 120


class InProcessAcrossHosts(JobRuntimeCase):
    def start(self, *distrun_args, per_node=2, steps=100, env=None, pause=0.05, heartbeat="2"):
        """srun --no-kill over every lab host, one distrun each; returns once the workers stepped."""
        record = '"$@"; code=$?; echo $code > "$0/$SLURM_PROCID.exit"; exit $code'
        p = self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", "--no-kill", "--output",
                             self.path("%t.out"), "--error", self.path("%t.err"), "/bin/sh", "-c", record,
                             self.dir, DISTRUN, "--nproc-per-node", str(per_node), "--grace-period", "3",
                             "--recovery", "in-process", "--heartbeat-timeout", heartbeat, *distrun_args, "--",
                             *python_command(), WORKER],
                            env=self.env(**module_env(OUT=self.dir, STEPS=str(steps), STEP_SECONDS=str(pause),
                                                      **(env or {}))))
        self.assertTrue(wait_for(lambda: self.steps() >= 3, timeout=BOUND), self.outputs())
        return p

    def rows(self):
        """inprocess_worker.py's lines: dicts of gen, step, rank, pid, sum, new, world."""
        out = []
        if not os.path.exists(self.path("log")):
            return out
        for line in self.read("log").splitlines():
            w = line.split()
            if len(w) == 14:
                out.append(dict(gen=int(w[1]), step=int(w[3]), rank=int(w[5]), pid=int(w[7]), sum=w[9],
                                new=int(w[11]), world=int(w[13])))
        return out

    def steps(self, gen=None):
        return max([r["step"] for r in self.rows() if gen is None or r["gen"] == gen], default=0)

    def generation(self):
        return max([r["gen"] for r in self.rows()], default=0)

    def pids(self, gen, rank):
        return {r["pid"] for r in self.rows() if r["gen"] == gen and r["rank"] == rank}

    def outputs(self):
        text = ""
        for t in range(len(NODES)):
            for kind in ("out", "err"):
                if os.path.exists(self.path(f"{t}.{kind}")):
                    text += f"-- task {t} {kind}:\n{self.read(f'{t}.{kind}')[-3000:]}"
        return text

    def check(self, steps):
        """Every rank agrees at every step; each generation begins where the last ended (the step in flight
        done again at most); the training reached `steps`."""
        rows = self.rows()
        out = self.outputs()
        by_step = collections.defaultdict(set)
        for r in rows:
            by_step[(r["gen"], r["step"])].add(r["sum"])
        for key, sums in by_step.items():
            self.assertEqual(len(sums), 1, f"ranks disagree at generation/step {key}: {sums}\n{out}")
        gens = sorted({r["gen"] for r in rows})
        for before, after in zip(gens, gens[1:]):
            last = max(r["step"] for r in rows if r["gen"] == before)
            first = min(r["step"] for r in rows if r["gen"] == after)
            self.assertIn(first, (last, last + 1), f"generation {after} began at {first}, {before} ended at {last}")
        self.assertEqual(self.steps(), steps, out)
        return gens

    def kept(self, before, after, ranks):
        for rank in ranks:
            self.assertEqual(self.pids(after, rank), self.pids(before, rank),
                             f"rank {rank} did not keep its process\n{self.outputs()}")

    def finish(self, p):
        p.communicate(timeout=BOUND)

    def test_a_killed_hosts_seat_goes_to_the_warm_spare(self):
        p = self.start("--nnodes", "2:3", "--elastic-policy", "spares")
        [victim] = distrun_pids_on(NODES[1], self.marker)
        os.kill(victim, signal.SIGKILL)
        self.finish(p)
        self.assertEqual(self.check(100), [0, 1])
        self.kept(0, 1, [0, 1])
        self.assertTrue(all(r["new"] == 1 for r in self.rows() if r["gen"] == 1 and r["rank"] in (2, 3)))
        self.assertIn("recovered in place", self.read("0.err"))

    def test_resize_renumbers_the_survivors_in_their_processes(self):
        p = self.start("--nnodes", "2:3")
        before = {rank: self.pids(0, rank) for rank in range(6)}
        [victim] = distrun_pids_on(NODES[1], self.marker)
        os.kill(victim, signal.SIGKILL)
        self.finish(p)
        self.check(100)
        self.assertEqual({r["world"] for r in self.rows() if r["gen"] == 1}, {4})
        for new_rank, old_rank in ((0, 0), (1, 1), (2, 4), (3, 5)):
            self.assertEqual(self.pids(1, new_rank), before[old_rank], self.outputs())

    def test_a_killed_worker_starts_again_alone(self):
        p = self.start("--max-restarts", "2")
        [victim] = self.pids(0, 3)
        os.kill(victim, signal.SIGKILL)
        self.finish(p)
        self.assertEqual(self.check(100), [0, 1])
        self.kept(0, 1, [0, 1, 2, 4, 5])
        self.assertNotIn(victim, self.pids(1, 3))

    def test_a_worker_that_exits_non_zero_starts_again_alone(self):
        p = self.start("--max-restarts", "1", env={"FAIL_AT": "4:10"})
        self.finish(p)
        self.assertEqual(self.check(100), [0, 1])
        self.kept(0, 1, [0, 1, 2, 3, 5])
        self.assertIn("exit code 3; starting it again alone", self.read("2.err"))

    def test_a_frozen_host_is_left_behind_and_its_peers_released(self):
        p = self.start("--nnodes", "2:3", "--elastic-policy", "spares")
        frozen = script_pids_on(NODES[1], self.marker, WORKER) + distrun_pids_on(NODES[1], self.marker)
        for pid in frozen:
            os.kill(pid, signal.SIGSTOP)
        try:
            self.assertTrue(wait_for(lambda: self.generation() >= 1 and self.steps(1) > 0, timeout=BOUND),
                            self.outputs())
        finally:
            for pid in frozen:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
        self.finish(p)
        self.check(100)
        self.kept(0, 1, [0, 1])

    def test_a_cut_link_is_left_behind(self):
        self.start("--nnodes", "2:3", "--elastic-policy", "spares")
        link = ["nsenter", f"--net=/run/netns/distrun-lab-{NODES[1]}", "ip", "link", "set", "eth0"]
        subprocess.run(link + ["down"], check=True)
        try:
            self.assertTrue(wait_for(lambda: self.generation() >= 1 and self.steps(1) > 0, timeout=BOUND),
                            self.outputs())
            self.assertTrue(wait_for(lambda: not distrun_pids_on(NODES[1], self.marker), timeout=BOUND))
        finally:
            subprocess.run(link + ["up"], check=True)
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("0.exit")) and os.path.exists(self.path("2.exit")),
                                 timeout=BOUND), self.outputs())
        self.check(100)
        self.kept(0, 1, [0, 1])

    def test_node_0_lost_its_standby_takes_over_in_place(self):
        p = self.start("--nnodes", "2:3")
        survivors = {rank: self.pids(0, rank) for rank in (2, 3, 4, 5)}
        [victim] = distrun_pids_on(NODES[0], self.marker)
        os.kill(victim, signal.SIGKILL)
        self.finish(p)
        self.check(100)
        for new_rank, old_rank in ((0, 2), (1, 3), (2, 4), (3, 5)):
            self.assertEqual(self.pids(1, new_rank), survivors[old_rank], self.outputs())
        self.assertIn("took over", self.read("1.err"))

    def test_twenty_faults_back_to_back(self):
        # Twenty workers killed one after another on node2 and node3 (each once the last recovery stepped);
        # node1's rank 0 keeps its process through all of them. One worker per host: each replacement's
        # import of torch has a CPU of its own (a heartbeat timeout of 5 s leaves room for a loaded host).
        p = self.start("--max-restarts", "20", steps=100000, pause=0.02, per_node=1, heartbeat="5")
        survivors = {0: self.pids(0, 0)}
        for fault in range(20):
            gen = self.generation()
            [victim] = self.pids(gen, 1 + fault % 2)
            os.kill(victim, signal.SIGKILL)
            self.assertTrue(wait_for(lambda: self.generation() == gen + 1 and
                                     self.steps(gen + 1) >= self.steps(gen) + 3, timeout=BOUND),
                            f"fault {fault}\n{self.outputs()}")
        self.slurm(["scancel", "--signal=TERM", "--name", self.marker_value], check=False)
        p.communicate(timeout=BOUND)
        rows = self.rows()
        by_step = collections.defaultdict(set)
        for r in rows:
            by_step[(r["gen"], r["step"])].add(r["sum"])
        self.assertTrue(all(len(s) == 1 for s in by_step.values()), self.outputs())
        self.assertEqual(max(r["gen"] for r in rows), 20)
        for rank, pids in survivors.items():
            self.assertEqual(self.pids(20, rank), pids, self.outputs())


if __name__ == "__main__":
    main()
