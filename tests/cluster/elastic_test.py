"""Elastic jobs (--nnodes MIN:MAX) across the lab's virtual hosts, with real PyTorch workers (gloo) that
all-reduce in a loop, check every sum against the world of their epoch, and resume from a checkpoint on the
shared file system (examples/elastic_allreduce.py). A host's distrun killed, or its link cut: the others go on
in the next epoch with the smaller world (resize) or with the spare in its place (spares), and no process of
the lost host's job is left (tearDown checks every host)."""
import os
import re
import signal
import subprocess

from cluster_harness import DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, distrun_pids_on, main, wait_for

EXAMPLE = os.path.join(REPO, "examples", "elastic_allreduce.py")
BOUND = 120


class ElasticAcrossHosts(JobRuntimeCase):
    def start(self, *distrun_args, per_node=2, steps=80):
        """srun --no-kill over every lab host, one distrun each; returns once every epoch-0 worker stepped."""
        p = self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", "--no-kill", "--output",
                             self.path("%t.out"), "--error", self.path("%t.err"), DISTRUN,
                             "--nproc-per-node", str(per_node), "--grace-period", "3", *distrun_args, "--",
                             PYTHON, EXAMPLE, "--checkpoint", self.path("ckpt"), "--steps", str(steps)])
        self.assertTrue(wait_for(lambda: int(self.read("ckpt") or 0) >= 3 if os.path.exists(self.path("ckpt"))
                                 else False, timeout=BOUND), self.outputs())
        return p

    def outputs(self):
        text = ""
        for t in range(len(NODES)):
            for kind in ("out", "err"):
                if os.path.exists(self.path(f"{t}.{kind}")):
                    text += f"-- task {t} {kind}:\n{self.read(f'{t}.{kind}')}"
        return text

    def finished(self, task):
        """(epoch, rank, world, node, nodes, host, first step, last step) of each worker that finished."""
        rows = []
        for line in self.read(f"{task}.out").splitlines():
            m = re.search(r"epoch (\d+) rank (\d+)/(\d+) node (\d+)/(\d+) on (\S+): steps (\d+)\.\.(\d+) sums OK",
                          line)
            if m:
                rows.append(tuple(int(g) if g.isdigit() else g for g in m.groups()))
        return rows

    def test_resize_survivors_go_on_after_a_hosts_distrun_is_killed(self):
        p = self.start("--nnodes", "2:3")
        [victim] = distrun_pids_on(NODES[2], self.marker)
        os.kill(victim, signal.SIGKILL)
        p.communicate(timeout=BOUND)
        out = self.outputs()
        rows = sorted(self.finished(0) + self.finished(1))
        # The two survivors' four workers finished the training in epoch 1, as a world of 4 on 2 nodes.
        self.assertEqual([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows],
                         [(1, 0, 4, 0, 2, NODES[0]), (1, 1, 4, 0, 2, NODES[0]),
                          (1, 2, 4, 1, 2, NODES[1]), (1, 3, 4, 1, 2, NODES[1])], out)
        self.assertTrue(all(r[7] == 80 and 3 <= r[6] < 80 for r in rows), out)
        self.assertIn("the job goes on without it in epoch 1", self.read("0.err"))
        self.assertIn("1 node(s) lost: node 2 (node3) in epoch 0", self.read("0.err"))

    def test_resize_survivors_go_on_after_a_hosts_link_goes_down(self):
        p = self.start("--nnodes", "2:3", "--heartbeat-timeout", "2")
        link = ["nsenter", f"--net=/run/netns/distrun-lab-{NODES[2]}", "ip", "link", "set", "eth0"]
        subprocess.run(link + ["down"], check=True)
        try:
            # node3 hears nothing from node 0 either: its distrun stops its workers and ends by itself.
            gone = wait_for(lambda: not distrun_pids_on(NODES[2], self.marker), timeout=BOUND)
            rows_done = wait_for(lambda: len(self.finished(0) + self.finished(1)) == 4, timeout=BOUND)
        finally:
            subprocess.run(link + ["up"], check=True)
        try:
            p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            pass  # node3's slurmd could not tell srun of its task's end while cut off; tearDown cancels the step
        out = self.outputs()
        self.assertTrue(gone and rows_done, out)
        rows = sorted(self.finished(0) + self.finished(1))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)
        self.assertIn("no heartbeat for 2s", self.read("0.err"))
        self.assertIn("lost the coordinator", self.read("2.err"))

    def test_spares_the_spare_takes_the_lost_hosts_seat_and_ranks(self):
        p = self.start("--nnodes", "2:3", "--elastic-policy", "spares")
        [victim] = distrun_pids_on(NODES[1], self.marker)
        os.kill(victim, signal.SIGKILL)
        p.communicate(timeout=BOUND)
        out = self.outputs()
        rows = sorted(self.finished(0) + self.finished(2))
        # The world keeps its size; node3 (the spare) now runs node 1's ranks 2 and 3.
        self.assertEqual([(r[0], r[1], r[2], r[3], r[5]) for r in rows],
                         [(1, 0, 4, 0, NODES[0]), (1, 1, 4, 0, NODES[0]),
                          (1, 2, 4, 1, NODES[2]), (1, 3, 4, 1, NODES[2])], out)
        self.assertIn("this node is a hot spare", self.read("2.err"))


if __name__ == "__main__":
    main()
