"""Elastic jobs across the lab's hosts that change shape: a node that arrives later (`distrun --join`, a
second srun step on the third host) grows a resize job's world or waits as a spare, which takes node 0's
seat when node 0 is lost, and a per-task job (one distrun per task, two per host) loses and replaces whole
hosts. Real PyTorch workers (gloo) all-reduce
in a loop, check every sum against their epoch's world and resume from a checkpoint
(examples/elastic_allreduce.py); tearDown checks that nothing of the job is left on any host."""
import os
import re
import signal

from cluster_harness import (DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, distrun_pids_on, main, script_pids_on,
                             wait_for)

EXAMPLE = os.path.join(REPO, "examples", "elastic_allreduce.py")

BOUND = 120
PORT = "29411"  # node 0's coordinator, which the arrival is told; each host has its own network


class ElasticReshape(JobRuntimeCase):
    def train(self, steps):
        return [PYTHON, EXAMPLE, "--checkpoint", self.path("ckpt"), "--steps", str(steps)]

    def wait_for_steps(self, n, *procs):
        def stepped():
            if any(p.poll() is not None for p in procs):
                return True  # ended early: the assertions that follow say how
            return os.path.exists(self.path("ckpt")) and int(self.read("ckpt") or 0) >= n
        self.assertTrue(wait_for(stepped, timeout=BOUND), self.outputs())

    def start_two(self, common, steps, env):
        """The job's first two hosts, node 0's coordinator on PORT."""
        return self.srun_popen(["-N2", "-w", ",".join(NODES[:2]), "--no-kill", "--output", self.path("first-%t.out"),
                                "--error", self.path("first-%t.err"), DISTRUN, "--coordinator-port", PORT, *common,
                                "--", *self.train(steps)], env=env)

    def arrive(self, common, steps, env):
        """A second srun on the third host whose distrun joins the running job."""
        return self.srun_popen(["-N1", "-w", NODES[2], "--no-kill", "--output", self.path("late.out"), "--error",
                                self.path("late.err"), DISTRUN, "--join", f"{NODES[0]}:{PORT}", *common, "--",
                                *self.train(steps)], env=env)

    def both_finish(self, first, late):
        """Waits for both sruns to succeed; the finished workers' rows, sorted, and every output."""
        first.communicate(timeout=BOUND)
        late.communicate(timeout=BOUND)
        out = self.outputs()
        self.assertEqual((first.returncode, late.returncode), (0, 0), out)
        return sorted(self.finished("first-0.out") + self.finished("first-1.out") + self.finished("late.out")), out

    def outputs(self):
        text = ""
        for name in sorted(os.listdir(self.dir)):
            if name.endswith((".out", ".err")):
                text += f"-- {name}:\n{self.read(name)}"
        return text

    def finished(self, name):
        """(epoch, rank, world, node, nodes, host) of each worker that finished in file `name`."""
        rows = []
        for line in self.read(name).splitlines():
            m = re.search(r"epoch (\d+) rank (\d+)/(\d+) node (\d+)/(\d+) on (\S+): steps \d+\.\.\d+ sums OK", line)
            if m:
                rows.append(tuple(int(g) if g.isdigit() else g for g in m.groups()))
        return rows

    def test_a_late_node_grows_the_world_now(self):
        env = self.env()
        common = ["--nnodes", "2:3", "--run-id", self.marker_value, "--scale-up", "now", "--scale-up-notice", "1",
                  "--change-signal", "USR1", "--nproc-per-node", "2", "--grace-period", "3"]
        first = self.start_two(common, 80, env)
        self.wait_for_steps(3, first)
        late = self.arrive(common, 80, env)
        rows, out = self.both_finish(first, late)
        # Epoch 1: a world of 6 workers on 3 nodes, the late host last.
        self.assertEqual([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows],
                         [(1, 0, 6, 0, 3, NODES[0]), (1, 1, 6, 0, 3, NODES[0]), (1, 2, 6, 1, 3, NODES[1]),
                          (1, 3, 6, 1, 3, NODES[1]), (1, 4, 6, 2, 3, NODES[2]), (1, 5, 6, 2, 3, NODES[2])], out)
        told = self.read("first-0.out") + self.read("first-1.out")
        for rank in range(4):
            self.assertIn(f"epoch 0 rank {rank}/4: told that the world changes", told)
        self.assertIn("admitted as node 2", self.read("late.err"))
        self.assertIn("1 node(s) arrived: node 2", self.read("first-0.err"))

    def test_a_late_node_waits_for_the_next_restart(self):
        env = self.env()
        common = ["--nnodes", "2:3", "--run-id", self.marker_value, "--max-restarts", "1", "--nproc-per-node", "1",
                  "--grace-period", "3"]
        first = self.start_two(common, 60, env)
        self.wait_for_steps(3, first)
        late = self.arrive(common, 60, env)
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("late.err")) and
                                 "this node is a hot spare" in self.read("late.err"), timeout=BOUND), self.outputs())
        # It waits as a spare until a restart: a worker of the second host dies (one of --max-restarts).
        [worker] = script_pids_on(NODES[1], self.marker, EXAMPLE)
        os.kill(worker, signal.SIGKILL)
        rows, out = self.both_finish(first, late)
        self.assertEqual([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows],
                         [(1, 0, 3, 0, 3, NODES[0]), (1, 1, 3, 1, 3, NODES[1]), (1, 2, 3, 2, 3, NODES[2])], out)
        self.assertIn("it joins the world at the next restart (--scale-up next-restart)", self.read("first-0.err"))
        self.assertIn("restarting all workers (restart 1 of 1, --max-restarts)", self.read("first-0.err"))

    def test_spares_an_arrived_spare_takes_node_0s_seat_when_the_standby_takes_over(self):
        # Node 0's loss under spares needs three seated nodes (a majority without node 0) and a spare: the lab's
        # three hosts hold the seated ones, and a second distrun on the third host arrives as the spare.
        env = self.env()
        common = ["--nnodes", "3:4", "--elastic-policy", "spares", "--run-id", self.marker_value,
                  "--nproc-per-node", "1", "--grace-period", "3"]
        first = self.srun_popen(["-N3", "--ntasks-per-node=1", "--no-kill", "--output", self.path("first-%t.out"),
                                 "--error", self.path("first-%t.err"), DISTRUN, "--coordinator-port", PORT, *common,
                                 "--", *self.train(80)], env=env)
        self.wait_for_steps(3, first)
        late = self.arrive(common, 80, env)
        self.assertTrue(wait_for(lambda: os.path.exists(self.path("late.err")) and
                                 "this node is a hot spare" in self.read("late.err"), timeout=BOUND), self.outputs())
        [node0] = distrun_pids_on(NODES[0], self.marker)
        os.kill(node0, signal.SIGKILL)
        first.communicate(timeout=BOUND)
        late.communicate(timeout=BOUND)
        out = self.outputs()
        self.assertEqual(late.returncode, 0, out)
        rows = sorted(self.finished("first-1.out") + self.finished("first-2.out") + self.finished("late.out"))
        # Epoch 1: the spare in node 0's seat (rank 0), the standby (node2) and node3's first distrun in theirs.
        self.assertEqual([(r[1], r[2], r[5]) for r in rows if r[0] == 1],
                         [(0, 3, NODES[2]), (1, 3, NODES[1]), (2, 3, NODES[2])], out)
        self.assertEqual(self.finished("first-0.out"), [], out)
        self.assertIn("took over with 3 node(s)", self.read("first-1.err"), out)

    def test_per_task_spares_count_hosts_and_a_lost_host_is_replaced_whole(self):
        p = self.srun_popen(["-N3", "--ntasks-per-node=2", "--no-kill", "--output", self.path("task-%t.out"),
                             "--error", self.path("task-%t.err"), DISTRUN, "--nnodes", "2:3", "--elastic-policy",
                             "spares", "--grace-period", "3", "--", *self.train(80)])
        self.wait_for_steps(3, p)
        # One task's distrun on the second host dies; the other one there is fenced with it.
        victim = distrun_pids_on(NODES[1], self.marker)[0]
        os.kill(victim, signal.SIGKILL)
        p.communicate(timeout=BOUND)
        out = self.outputs()
        rows = sorted(sum((self.finished(f"task-{t}.out") for t in range(6)), []))
        # The third host's two tasks run the second host's node rank and ranks; the world keeps 4 workers.
        self.assertEqual([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows],
                         [(1, 0, 4, 0, 2, NODES[0]), (1, 1, 4, 0, 2, NODES[0]),
                          (1, 2, 4, 1, 2, NODES[2]), (1, 3, 4, 1, 2, NODES[2])], out)
        fenced = [t for t in (2, 3) if "fenced" in self.read(f"task-{t}.err")]
        self.assertTrue(fenced, out)
        self.assertIn("this node is a hot spare", self.read("task-4.err"))


if __name__ == "__main__":
    main()
