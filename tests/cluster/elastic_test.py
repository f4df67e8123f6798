"""Elastic jobs (--nnodes MIN:MAX) across the lab's virtual hosts, with real PyTorch workers (gloo) that
all-reduce in a loop, check every sum against the world of their epoch, and resume from a checkpoint on the
shared file system (examples/elastic_allreduce.py). A host's distrun killed, its link cut, its distrun frozen,
the whole host paused, or its --node-check failing: the others go on in the next epoch with the smaller world
(resize) or with the spare in its place (spares); below MIN the job ends naming the lost hosts. Node 0 (node1),
which hosts the coordinator, too: killed, cut off or paused, its standby takes the job over. A lost host's
workers must be stopped before the next epoch's start (the survivors do not wait for them), and no process of
the lost host's job is left (tearDown checks every host)."""
import os
import re
import signal
import subprocess
import time

from cluster_harness import (DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, distrun_pids_on, main, processes_with,
                             script_pids_on, wait_for)
from launch_helpers import sentinel_of

EXAMPLE = os.path.join(REPO, "examples", "elastic_allreduce.py")
BOUND = 120
TICKS = os.sysconf("SC_CLK_TCK")


def start_time(pid):
    """When a process started, in seconds since boot (CLOCK_BOOTTIME): field 22 of /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19]) / TICKS


def alive(pid, started):
    """Whether the process that started at `started` still runs (a zombie has ended; a new process may
    have its pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in "ZX" and int(fields[19]) / TICKS == started


PF_EXITING = 0x4
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)


def running(pid, started):
    """Whether the process still runs its program: alive, not exiting, and not bound to (no SIGKILL pending:
    a fatal signal, a SIGTERM without a handler included, is one for every thread). A worker killed as the
    new epoch starts may take a while to free its memory: that is not running beside the epoch. Read in
    this order, a True means the process ran its program when this was called."""
    try:
        with open(f"/proc/{pid}/status") as f:
            pending = [int(line.split()[1], 16) for line in f if line.startswith(("SigPnd:", "ShdPnd:"))]
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return (fields[0] not in "ZX" and int(fields[19]) / TICKS == started and not int(fields[6]) & PF_EXITING
            and not any(p & SIGKILL_BIT for p in pending))


class lossy_link:
    """Drops `percent` % of the packets a lab host sends and receives (nft rules in its network namespace,
    removed on exit): a bad link, not a dead one."""

    def __init__(self, node, percent):
        self.ns = ["nsenter", f"--net=/run/netns/distrun-lab-{node}", "nft"]
        self.percent = percent

    def __enter__(self):
        rules = (f"table inet distrun_lossy {{\n"
                 f"  chain in {{ type filter hook input priority 0; numgen random mod 100 < {self.percent} drop; }}\n"
                 f"  chain out {{ type filter hook output priority 0; numgen random mod 100 < {self.percent} drop; }}\n"
                 f"}}\n")
        subprocess.run(self.ns + ["-f", "-"], input=rules, text=True, check=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(self.ns + ["delete", "table", "inet", "distrun_lossy"], check=True)


class ElasticAcrossHosts(JobRuntimeCase):
    def start(self, *distrun_args, per_node=2, steps=80, example_args=()):
        """srun --no-kill over every lab host, one distrun each; returns once every epoch-0 worker stepped.
        A shell writes each distrun's exit code to TASK.exit: srun never hears it from a host that was cut
        off when its task ended (slurmstepd does not send the task's end again)."""
        record = '"$@"; code=$?; echo $code > "$0/$SLURM_PROCID.exit"; exit $code'
        p = self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", "--no-kill", "--output",
                             self.path("%t.out"), "--error", self.path("%t.err"), "/bin/sh", "-c", record,
                             self.dir, DISTRUN,
                             "--nproc-per-node", str(per_node), "--grace-period", "3", *distrun_args, "--",
                             PYTHON, EXAMPLE, "--checkpoint", self.path("ckpt"), "--steps", str(steps),
                             *example_args])
        self.assertTrue(wait_for(lambda: int(self.read("ckpt") or 0) >= 3 if os.path.exists(self.path("ckpt"))
                                 else False, timeout=BOUND), self.outputs())
        return p

    def outputs(self):
        text = ""
        for t in range(len(NODES)):
            for kind in ("out", "err"):
                if os.path.exists(self.path(f"{t}.{kind}")):
                    text += f"-- task {t} {kind}:\n{self.read(f'{t}.{kind}')}"
        return text + f"-- exit codes: {self.exits()}\n"

    def finished(self, task):
        """(epoch, rank, world, node, nodes, host, first step, last step) of each worker that finished."""
        rows = []
        for line in self.read(f"{task}.out").splitlines():
            m = re.search(r"epoch (\d+) rank (\d+)/(\d+) node (\d+)/(\d+) on (\S+): steps (\d+)\.\.(\d+) sums OK",
                          line)
            if m:
                rows.append(tuple(int(g) if g.isdigit() else g for g in m.groups()))
        return rows

    def exits(self):
        """{task: exit code} of the distrun processes that ended (as their shell saw it: 128+N for signal N)."""
        return {t: int(self.read(f"{t}.exit")) for t in range(len(NODES))
                if os.path.exists(self.path(f"{t}.exit"))}

    def workers_on(self, node):
        """{pid: start time} of the test's workers on one host."""
        found = {}
        for pid in script_pids_on(node, self.marker, EXAMPLE):
            try:
                found[pid] = start_time(pid)
            except OSError:
                pass  # ended meanwhile
        return found

    def workers_of_epoch(self, epoch):
        """{pid: start time} of the test's workers of one epoch, on any host."""
        found = {}
        for pid in processes_with(self.marker):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    env = f.read().split(b"\0")
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdline = f.read().split(b"\0")
                if f"DISTRUN_EPOCH={epoch}".encode() in env and cmdline[1:2] == [EXAMPLE.encode()]:
                    found[pid] = start_time(pid)
            except OSError:
                pass
        return found

    def outlived(self, victims, epoch, count, since):
        """Watches a lost host's workers (`victims`, from workers_on) until they no longer run and the `count`
        workers of `epoch` were started. Returns how long a victim was last seen running after the first
        worker of the epoch had started: > 0 means the lost host's workers ran beside the new epoch. Only an
        overlap can make it positive (a process seen running ran then; a start time is exact to a clock
        tick), so a slow poll may miss an overlap but never invents one. Also returns the timeline, counted
        from `since` (CLOCK_BOOTTIME, when the test acted), for the failure message."""
        last_running, new, scanned = float("-inf"), {}, float("-inf")
        deadline = time.monotonic() + BOUND
        while time.monotonic() < deadline:
            now = time.clock_gettime(time.CLOCK_BOOTTIME)
            if any(running(pid, started) for pid, started in victims.items()):
                last_running = now
            # Victims that run on 10 s into the epoch will not stop by themselves.
            if len(new) >= count and (last_running < now or now > min(new.values()) + 10):
                break
            # The new epoch's workers run for seconds: a scan now and then finds each, with its start time.
            if last_running < now or now > scanned + 0.1:
                new.update(self.workers_of_epoch(epoch))
                scanned = now
            time.sleep(0.005)
        self.assertGreaterEqual(len(new), count, f"epoch {epoch}'s workers did not start\n{self.outputs()}")
        self.assertTrue(wait_for(lambda: not any(alive(pid, started) for pid, started in victims.items()),
                                 timeout=BOUND), f"the lost host's workers did not end\n{self.outputs()}")
        # A start time is a whole clock tick, rounded down: the first worker started before that tick ended.
        first = min(new.values()) + 1 / TICKS
        timeline = (f"the first worker of epoch {epoch} started by {first - since:.3f}s after the test cut off or "
                    f"froze the host; its workers were last seen running at {last_running - since:.3f}s")
        return last_running - first, timeline

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
        self.start("--nnodes", "2:3", "--heartbeat-timeout", "2")
        link = ["nsenter", f"--net=/run/netns/distrun-lab-{NODES[2]}", "ip", "link", "set", "eth0"]
        subprocess.run(link + ["down"], check=True)
        try:
            # node3 hears nothing from node 0 either: its distrun stops its workers and ends by itself.
            gone = wait_for(lambda: not distrun_pids_on(NODES[2], self.marker), timeout=BOUND)
            rows_done = wait_for(lambda: len(self.finished(0) + self.finished(1)) == 4, timeout=BOUND)
        finally:
            subprocess.run(link + ["up"], check=True)
        # srun never hears of node3's task (see start); the three exit codes say the job's end, and tearDown
        # cancels the step.
        done = wait_for(lambda: len(self.exits()) == 3, timeout=BOUND)
        out = self.outputs()
        self.assertTrue(gone and rows_done and done, out)
        rows = sorted(self.finished(0) + self.finished(1))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)
        self.assertIn("no heartbeat for 2s", self.read("0.err"))
        self.assertIn("lost the coordinator", self.read("2.err"))
        self.assertEqual(self.exits(), {0: 0, 1: 0, 2: 1}, out)

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

    def test_resize_below_the_minimum_the_job_ends_naming_the_lost_hosts(self):
        p = self.start("--nnodes", "2:3")
        [second] = distrun_pids_on(NODES[1], self.marker)
        os.kill(second, signal.SIGKILL)
        # Two nodes are enough: the job goes on in epoch 1. Losing a second host leaves one.
        self.assertTrue(wait_for(lambda: "epoch 1: node 0 of 2" in self.read("0.err"), timeout=BOUND),
                        self.outputs())
        # While it starts epoch 1's workers, a child it spawns is briefly a second "distrun" (until its exec).
        self.assertTrue(wait_for(lambda: len(distrun_pids_on(NODES[2], self.marker)) == 1, timeout=BOUND))
        # node3, epoch 1's standby, acknowledges epoch 1's snapshot as it joins. Until node 0 heard that, it judges
        # a loss by epoch 0's three nodes, where node2 and node3 unheard are a majority that might go on with
        # epoch 0's standby, and rightly fences itself rather than end the job. Epoch 1's workers stepping
        # twice is long after the acknowledgement.
        stepped = int(self.read("ckpt") or 0)
        self.assertTrue(wait_for(lambda: int(self.read("ckpt") or 0) >= stepped + 2, timeout=BOUND), self.outputs())
        [third] = distrun_pids_on(NODES[2], self.marker)
        os.kill(third, signal.SIGKILL)
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        self.assertNotEqual(p.returncode, 0, out)
        self.assertEqual(self.exits(), {0: 1, 1: 128 + signal.SIGKILL, 2: 128 + signal.SIGKILL}, out)
        self.assertIn("node 2 (node3): node lost: its distrun disconnected; 1 node(s) left, fewer than the 2 the "
                      "job needs (--nnodes); lost: node 1 (node2), node 2 (node3)", self.read("0.err"))
        self.assertEqual(self.finished(0), [], out)

    def cut_off(self, task):
        """Takes task `task`'s host off the network until the others went on in epoch 1 and that host ended its
        part (5 s at least), then back; fails unless its workers stopped before epoch 1's started. Returns the
        job's output."""
        victims = self.workers_on(NODES[task])
        self.assertEqual(len(victims), 2, self.outputs())
        link = ["nsenter", f"--net=/run/netns/distrun-lab-{NODES[task]}", "ip", "link", "set", "eth0"]
        cut = time.clock_gettime(time.CLOCK_BOOTTIME)
        subprocess.run(link + ["down"], check=True)
        try:
            overlap, timeline = self.outlived(victims, epoch=1, count=4, since=cut)
            ended = wait_for(lambda: task in self.exits(), timeout=BOUND)
            time.sleep(max(0.0, cut + 5 - time.clock_gettime(time.CLOCK_BOOTTIME)))
        finally:
            subprocess.run(link + ["up"], check=True)
        # srun never hears of the cut-off host's task (see start); the others' exit codes say the job's end.
        done = wait_for(lambda: len(self.exits()) == 3, timeout=BOUND)
        out = self.outputs()
        self.assertTrue(ended and done, out)
        self.assertLessEqual(overlap, 0,
                             f"{NODES[task]}'s workers ran {overlap:.3f}s beside epoch 1: {timeline}\n{out}")
        return out

    def pause_host(self, task):
        """Pauses task `task`'s whole host (a stopped VM: distrun, its sentinel and its workers) until the
        others went on in epoch 1, then continues it, distrun first. Returns the workers it paused and whether
        the job went on."""
        [distrun] = distrun_pids_on(NODES[task], self.marker)
        victims = self.workers_on(NODES[task])
        self.assertEqual(len(victims), 2, self.outputs())
        others = [sentinel_of(distrun), *victims]  # the sentinel does not carry the marker
        for pid in [distrun, *others]:
            os.kill(pid, signal.SIGSTOP)
        try:
            went_on = wait_for(lambda: len(self.workers_of_epoch(1)) == 4, timeout=BOUND)
        finally:
            os.kill(distrun, signal.SIGCONT)
            time.sleep(0.5)  # distrun first, so that it reads its news before its sentinel's timer runs
            for pid in others:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass  # a worker distrun already ended (it continues the workers it stops)
        return victims, went_on

    def test_resize_a_cut_off_host_stops_its_workers_before_the_others_go_on(self):
        # The link comes back once the survivors went on: the cut-off host must have ended by itself by then.
        self.start("--nnodes", "2:3", "--heartbeat-timeout", "2", steps=40)
        out = self.cut_off(2)
        rows = sorted(self.finished(0) + self.finished(1))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)
        self.assertIn("node 2 (node3): node lost: no heartbeat for 2s (--heartbeat-timeout); the job goes on "
                      "without it in epoch 1", self.read("0.err"))
        # Cut off, it cannot hear that it was fenced: it kills its workers when it loses node 0, turns to the
        # standby, which it cannot reach either, and ends as a node that lost the coordinator does.
        self.assertIn("its standby at node2:", self.read("2.err"))
        self.assertIn("killing this node's workers at once", self.read("2.err"))
        self.assertIn("the job stopped: lost the coordinator at node2:", self.read("2.err"))
        self.assertEqual(self.exits(), {0: 0, 1: 0, 2: 1}, out)

    def through_a_lossy_link(self, task):
        """Starts a job of 3 nodes (`--nnodes 2:3`), drops half the packets of task `task`'s host both ways for
        20 s (nft in its namespace), and fails unless the training goes on after it. Returns the job's output."""
        p = self.start("--nnodes", "2:3", steps=400)
        with lossy_link(NODES[task], percent=50):
            time.sleep(20)
        before = int(self.read("ckpt") or 0)
        progressing = wait_for(lambda: int(self.read("ckpt") or 0) >= before + 5, timeout=60)
        out = self.outputs()
        self.assertTrue(progressing and p.poll() is None, f"the training did not go on\n{out}")
        return out

    def test_resize_a_lossy_link_never_ends_the_job(self):
        # A gray failure: node3's link drops half the packets both ways for 20 s (nft in its namespace).
        # Whether the job goes on without node3 or keeps it, it must not end: when node3 kills its workers
        # for hearing nothing from node 0, the survivors' failed all-reduce is that loss, not a failure.
        out = self.through_a_lossy_link(2)
        self.assertNotIn(0, self.exits(), out)  # neither survivor's distrun ended
        self.assertNotIn(1, self.exits(), out)
        if 2 in self.exits():  # node3 left: lost, not a worker failure
            self.assertIn(self.exits()[2], (1, 75), out)
            self.assertIn("node 2 (node3): node lost", self.read("0.err"), out)

    def test_resize_a_frozen_distrun_is_fenced_by_its_sentinel(self):
        p = self.start("--nnodes", "2:3", "--heartbeat-timeout", "2", steps=50)
        victims = self.workers_on(NODES[2])
        self.assertEqual(len(victims), 2, self.outputs())
        [frozen] = distrun_pids_on(NODES[2], self.marker)
        frozen_at = time.clock_gettime(time.CLOCK_BOOTTIME)
        os.kill(frozen, signal.SIGSTOP)
        try:
            overlap, timeline = self.outlived(victims, epoch=1, count=4, since=frozen_at)
        finally:
            try:
                os.kill(frozen, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the sentinel killed it
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        self.assertLessEqual(overlap, 0, f"node3's workers ran {overlap:.3f}s beside epoch 1: {timeline}\n{out}")
        rows = sorted(self.finished(0) + self.finished(1))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)
        # The sentinel killed the frozen distrun too: it never runs again to hear that it was fenced.
        self.assertEqual(self.exits(), {0: 0, 1: 0, 2: 128 + signal.SIGKILL}, out)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL, out)

    def test_resize_a_paused_host_is_fenced_when_it_wakes(self):
        # The whole host pauses (a stopped VM): distrun, its sentinel and the workers. No sentinel acts, so
        # distrun itself must stop the workers when it wakes and hears that the job went on without it.
        p = self.start("--nnodes", "2:3", "--heartbeat-timeout", "2", steps=40)
        victims, went_on = self.pause_host(2)
        self.assertTrue(wait_for(lambda: 2 in self.exits(), timeout=BOUND), self.outputs())
        # distrun waits for its workers before it exits.
        self.assertFalse([pid for pid, started in victims.items() if alive(pid, started)], self.outputs())
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        self.assertTrue(went_on, out)
        self.assertIn("fenced: lost in epoch 0, and the job went on without it (now epoch 1); killing this "
                      "node's workers at once", self.read("2.err"))
        self.assertEqual(self.exits(), {0: 0, 1: 0, 2: 75}, out)
        self.assertEqual(p.returncode, 75, out)
        rows = sorted(self.finished(0) + self.finished(1))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)

    # Node 0 (node1) hosts the coordinator; node 1 (node2) is every epoch's standby here.
    def test_resize_node_0_killed_its_standby_takes_the_job_over(self):
        p = self.start("--nnodes", "2:3", example_args=("--job-key", "origin"))
        victims = self.workers_on(NODES[0])
        [victim] = distrun_pids_on(NODES[0], self.marker)
        killed = time.clock_gettime(time.CLOCK_BOOTTIME)
        os.kill(victim, signal.SIGKILL)  # its sentinel ends its workers
        overlap, timeline = self.outlived(victims, epoch=1, count=4, since=killed)
        p.communicate(timeout=BOUND)
        out = self.outputs()
        self.assertLessEqual(overlap, 0, f"node1's workers ran {overlap:.3f}s beside epoch 1: {timeline}\n{out}")
        rows = sorted(self.finished(1) + self.finished(2))
        # The survivors finished the training in epoch 1 as a world of 4 on 2 nodes, node2 first.
        self.assertEqual([(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows],
                         [(1, 0, 4, 0, 2, NODES[1]), (1, 1, 4, 0, 2, NODES[1]),
                          (1, 2, 4, 1, 2, NODES[2]), (1, 3, 4, 1, 2, NODES[2])], out)
        self.assertTrue(all(r[7] == 80 and 3 <= r[6] < 80 for r in rows), out)
        # The key epoch 0 wrote to node1's store was read in epoch 1 from node2's.
        self.assertIn(f"epoch 1 job/origin: begun in epoch 0 on {NODES[0]}", self.read("1.out"), out)
        self.assertIn("this node, its standby, serves the job on node2:", self.read("1.err"), out)
        self.assertIn("turning to its standby at node2:", self.read("2.err"), out)
        self.assertIn("node lost: it hosted the job's coordinator; its standby, node 1 (node2), took over with 2 "
                      "node(s)", self.read("2.err"), out)
        self.assertEqual(self.exits(), {0: 128 + signal.SIGKILL, 1: 0, 2: 0}, out)

    def test_resize_node_0_cut_off_fences_itself_and_its_standby_goes_on(self):
        # node1's link goes down: node2 and node3 turn to node2 after the heartbeat timeout and go on; node1
        # no longer hears two of the standby's three nodes, the standby among them: it kills its workers and
        # leaves (75) before the next epoch starts, so two coordinators never run the job.
        self.start("--nnodes", "2:3", "--heartbeat-timeout", "2", steps=40)
        out = self.cut_off(0)
        rows = sorted(self.finished(1) + self.finished(2))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)
        self.assertIn("fenced: this node hosts the job's coordinator but no longer hears", self.read("0.err"), out)
        self.assertIn("took over with 2 node(s)", self.read("2.err"), out)
        self.assertEqual(self.exits(), {0: 75, 1: 0, 2: 0}, out)

    def test_resize_node_0_paused_is_taken_over_and_fenced_when_it_wakes(self):
        p = self.start("--nnodes", "2:3", "--heartbeat-timeout", "2", steps=40)
        victims, went_on = self.pause_host(0)
        self.assertTrue(wait_for(lambda: 0 in self.exits(), timeout=BOUND), self.outputs())
        self.assertFalse([pid for pid, started in victims.items() if alive(pid, started)], self.outputs())
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        self.assertTrue(went_on, out)
        self.assertIn("fenced: this node hosts the job's coordinator but no longer hears", self.read("0.err"), out)
        self.assertEqual(self.exits(), {0: 75, 1: 0, 2: 0}, out)
        rows = sorted(self.finished(1) + self.finished(2))
        self.assertEqual([(r[0], r[2], r[4]) for r in rows], [(1, 4, 2)] * 4, out)

    def test_resize_node_0_on_a_lossy_link_never_ends_the_job(self):
        # A gray failure of node 0's: its link drops half the packets both ways for 20 s. The job goes on,
        # with node 0 (its links slow but alive) or without it: node 0 steps down (75) when the nodes it lost,
        # with those whose links retransmit, could be the standby's majority, and the standby takes over.
        out = self.through_a_lossy_link(0)
        self.assertLess(len(self.exits()), 3, out)
        for task, code in self.exits().items():  # a node that left was lost or fenced, never a failure
            self.assertIn(code, (1, 75), out)
        if 0 in self.exits():
            self.assertEqual(self.exits()[0], 75, out)
            self.assertIn("fenced: this node hosts the job's coordinator", self.read("0.err"), out)

    def test_resize_node_0_and_its_standby_lost_together_end_the_job_naming_both(self):
        self.lose_node_0_and_its_standby(apart=0)

    def test_resize_node_0_and_its_standby_lost_a_moment_apart_end_the_job_naming_both(self):
        # 0.1 s apart, the standby has mostly taken over already: node3 hears of its loss in epoch 1's
        # rendezvous (seen at 0.05 s and 0.1 s in the lab; at 0.02 s, in the running epoch).
        self.lose_node_0_and_its_standby(apart=0.1)

    def lose_node_0_and_its_standby(self, apart):
        p = self.start("--nnodes", "1:3")
        victims = distrun_pids_on(NODES[0], self.marker) + distrun_pids_on(NODES[1], self.marker)
        self.assertEqual(len(victims), 2, self.outputs())
        os.kill(victims[0], signal.SIGKILL)
        time.sleep(apart)
        os.kill(victims[1], signal.SIGKILL)
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        # node3 turns to node2, which is gone too: with nowhere left to turn, its job ends (its workers may
        # have failed first, their peers gone: the loss is still what it names). node2 may have taken the
        # job over in the moment between the two deaths; node3 then learns of the loss in epoch 1's
        # rendezvous ("rendezvous failed: lost the coordinator at ...") rather than in a running epoch.
        self.assertIn("lost the coordinator at node2:", self.read("2.err"), out)
        self.assertIn("(its standby, after the coordinator at node1:", self.read("2.err"), out)
        self.assertEqual(self.exits(), {0: 128 + signal.SIGKILL, 1: 128 + signal.SIGKILL, 2: 1}, out)
        self.assertEqual(self.finished(2), [], out)

    def test_spares_take_the_seat_of_a_host_failing_its_node_check(self):
        check = 'test "$(hostname)" != node2'  # each lab host has its own UTS namespace
        p = self.start("--nnodes", "2:3", "--elastic-policy", "spares", "--node-check", check, steps=30)
        _, err = p.communicate(timeout=BOUND)
        out = self.outputs() + err
        # node2 (node 1) is left out before epoch 0 begins; node3, the spare, has its seat and ranks.
        rows = sorted(self.finished(0) + self.finished(2))
        self.assertEqual([(r[0], r[1], r[2], r[3], r[5]) for r in rows],
                         [(0, 0, 4, 0, NODES[0]), (0, 1, 4, 0, NODES[0]),
                          (0, 2, 4, 1, NODES[2]), (0, 3, 4, 1, NODES[2])], out)
        self.assertTrue(all(r[6] == 0 and r[7] == 30 for r in rows), out)
        self.assertEqual(self.finished(1), [], out)
        self.assertIn(f"--node-check '{check}' failed on node2: exit code 1; this node leaves the job "
                      "(exit code 75)", self.read("1.err"))
        self.assertEqual(self.exits(), {0: 0, 1: 75, 2: 0}, out)
        self.assertEqual(p.returncode, 75, out)


if __name__ == "__main__":
    main()
