"""Elastic jobs (--nnodes MIN:MAX) with several real distrun processes on this machine, each one node of the
job: a lost node (its distrun killed, or frozen past the heartbeat timeout) stops the epoch's workers
everywhere and the others go on in the next epoch with the smaller world (resize) or with a spare in the lost
node's seat (spares); below MIN the job ends naming the lost nodes; a node that comes back is fenced."""
import os
import signal
import time
import unittest

from launch_helpers import processes_with, sentinel_of, wait_for

from distrun_harness import DISTRUN, detect_json, run
from multi_node import MultiNodeCase, free_port

def signal_if_alive(pid, sig):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def environ_has(pid, entry):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry.encode() in f.read().split(b"\0")
    except OSError:
        return False


# Each worker logs its epoch's view of the world, waits in epoch 0 until the test acts, and ends in the next.
WORKER = ('echo "epoch $DISTRUN_EPOCH node $NODE group $GROUP_RANK/$GROUP_WORLD_SIZE rank $RANK/$WORLD_SIZE" '
          '>> $OUT/log; echo up > $OUT/up-$NODE-$DISTRUN_EPOCH; '
          'if [ $DISTRUN_EPOCH = 0 ]; then sleep 60; fi; '
          'if [ -n "$HOLD" ]; then while [ ! -e $OUT/go ]; do sleep 0.05; done; fi')


class Elastic(MultiNodeCase):
    def log(self):
        with open(self.path("log")) as f:
            return sorted(f.read().splitlines())

    def test_resize_goes_on_without_a_killed_node(self):
        nodes = self.start_nodes([1, 2, 1], WORKER, "--nnodes", "2:3")
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        # Node 1's two workers share its up file: wait until both have logged.
        self.assertTrue(wait_for(lambda: len(self.log()) == 4, timeout=20), self.log())
        nodes[1].kill()  # SIGKILL: its sentinel ends its workers
        results = self.finish([nodes[0], nodes[2]])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), [
            "epoch 0 node 0 group 0/3 rank 0/4",
            "epoch 0 node 1 group 1/3 rank 1/4",
            "epoch 0 node 1 group 1/3 rank 2/4",
            "epoch 0 node 2 group 2/3 rank 3/4",
            # Launch node 2 is node 1 of the second epoch's world of 2 nodes and 2 workers.
            "epoch 1 node 0 group 0/2 rank 0/2",
            "epoch 1 node 2 group 1/2 rank 1/2",
        ])
        for code, out, err in results:
            self.assertIn("node 1 (", err)
            self.assertIn("the job goes on without it in epoch 1", err)
        self.assertIn("the job ran 2 epochs; 0 restart(s) after a worker failure; 1 node(s) lost: node 1", results[0][2])

    def test_every_epoch_gets_fresh_ports(self):
        # A fenced node's workers, or the last epoch's store, must never be reached on the new epoch's ports.
        # (With distrun's torch store, the default, MASTER_PORT is the runtime's port and each epoch gets a
        # fresh keyspace instead: torch_test.py.)
        script = ('echo "$DISTRUN_EPOCH $MASTER_PORT $JAX_COORDINATOR_ADDRESS" >> $OUT/ports; '
                  'echo up > $OUT/up-$NODE-$DISTRUN_EPOCH; if [ $DISTRUN_EPOCH = 0 ]; then sleep 60; fi')
        nodes = self.start_nodes([1, 1, 1], script, "--nnodes", "2:3", "--torch-store", "rank0")
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[2].kill()
        self.assertEqual([r[0] for r in self.finish(nodes[:2])], [0, 0])
        with open(self.path("ports")) as f:
            epochs = {}
            for line in f.read().splitlines():
                epoch, master, jax = line.split()
                epochs.setdefault(epoch, set()).add((master, jax.rsplit(":", 1)[1]))
        self.assertEqual(sorted(epochs), ["0", "1"])
        self.assertEqual([len(v) for v in epochs.values()], [1, 1], epochs)  # every node agrees
        (master0, jax0), (master1, jax1) = epochs["0"].pop(), epochs["1"].pop()
        self.assertNotEqual(master0, master1)
        self.assertNotEqual(jax0, jax1)

    def test_a_spare_takes_the_lost_nodes_seat(self):
        nodes = self.start_nodes([1, 1, 1], WORKER, "--nnodes", "2:3", "--elastic-policy", "spares")
        self.wait_for_files("up-0-0", "up-1-0")
        # Node 2 is a spare: it runs nothing in epoch 0.
        time.sleep(0.3)
        self.assertFalse(os.path.exists(self.path("up-2-0")))
        nodes[1].kill()
        results = self.finish([nodes[0], nodes[2]])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), [
            "epoch 0 node 0 group 0/2 rank 0/2",
            "epoch 0 node 1 group 1/2 rank 1/2",
            "epoch 1 node 0 group 0/2 rank 0/2",
            "epoch 1 node 2 group 1/2 rank 1/2",  # the lost node's seat and ranks, world unchanged
        ])
        self.assertIn("this node is a hot spare", results[1][2])

    def test_the_jobs_keys_outlive_the_epoch_and_the_node_that_wrote_them(self):
        # Each write of a job key returns once the epoch's standby (node 1's distrun) holds it; a write that
        # waited for an acknowledgement that never comes would hang the epoch here.
        script = ('if [ $DISTRUN_EPOCH = 0 ]; then '
                  '"$DISTRUN" kv set job/from-$NODE "epoch 0" && "$DISTRUN" kv add job/count 1 >/dev/null && '
                  '"$DISTRUN" kv set epoch-key-$NODE x && echo up > $OUT/up-$NODE-0; sleep 60; '
                  'else "$DISTRUN" kv try-get job/from-2 > $OUT/job-$NODE; '
                  '"$DISTRUN" kv try-get job/count >> $OUT/job-$NODE; '
                  '"$DISTRUN" kv try-get epoch-key-0 > /dev/null; echo "epoch key $?" >> $OUT/job-$NODE; fi')
        nodes = self.start_nodes([1, 1, 1], script, "--nnodes", "2:3", env={"DISTRUN": DISTRUN})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[2].kill()
        results = self.finish(nodes[:2])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        for node in (0, 1):
            with open(self.path(f"job-{node}")) as f:
                # Node 2's key and the count are there in epoch 1; epoch 0's own keys are not (exit 1).
                self.assertEqual(f.read().splitlines(), ["epoch 0", "3", "epoch key 1"])

    def test_below_the_minimum_the_job_ends_naming_the_lost_nodes(self):
        nodes = self.start_nodes([1, 1, 1], WORKER, "--nnodes", "3:3")
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[2].kill()
        results = self.finish(nodes[:2])
        for code, out, err in results:
            self.assertEqual(code, 1, err)
            self.assertIn("fewer than the 3 the job needs (--nnodes); lost: node 2", err)

    def test_node_0_lost_its_standby_takes_the_job_over(self):
        # Node 0's distrun (the coordinator's host) is SIGKILLed: its sentinel ends its worker; nodes 1 and 2
        # turn to node 1, the epoch's standby, which takes over with both (a majority of 3) and begins
        # epoch 1 without node 0. A key of epoch 0 is read in epoch 1, from the new coordinator.
        script = ('if [ $DISTRUN_EPOCH = 0 ]; then "$DISTRUN" kv set job/step-$NODE "$NODE at 0" && '
                  'echo up > $OUT/up-$NODE-0; sleep 60; else '
                  'echo "epoch $DISTRUN_EPOCH node $NODE group $GROUP_RANK/$GROUP_WORLD_SIZE" >> $OUT/log; '
                  '"$DISTRUN" kv try-get job/step-0 > $OUT/job-$NODE; '
                  'echo "$DISTRUN_COORDINATOR_ADDRESS" > $OUT/coordinator-$NODE; fi')
        nodes = self.start_nodes([1, 1, 1], script, "--nnodes", "2:3", "--heartbeat-timeout", "2",
                                 env={"DISTRUN": DISTRUN})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[0].kill()
        results = self.finish(nodes[1:])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), ["epoch 1 node 1 group 0/2", "epoch 1 node 2 group 1/2"])
        coordinators = set()
        for node in (1, 2):
            with open(self.path(f"job-{node}")) as f:
                self.assertEqual(f.read().strip(), "0 at 0")
            with open(self.path(f"coordinator-{node}")) as f:
                coordinators.add(f.read().strip())
        self.assertEqual(len(coordinators), 1, coordinators)  # both reach the new coordinator
        self.assertNotIn(f":{self.port}", coordinators.pop())
        self.assertIn("this node, its standby, serves the job on", results[0][2])
        self.assertIn("turning to its standby at", results[1][2])
        for code, out, err in results:
            self.assertIn("its standby, node 1 (", err)
            self.assertIn("took over with 2 node(s)", err)
        self.finish(nodes[:1])

    def test_under_spares_a_spare_takes_node_0s_seat_when_the_standby_takes_over(self):
        nodes = self.start_nodes([1, 1, 1, 1], WORKER, "--nnodes", "3:4", "--elastic-policy", "spares")
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[0].kill()
        results = self.finish(nodes[1:])
        self.assertEqual([r[0] for r in results], [0, 0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), [
            "epoch 0 node 0 group 0/3 rank 0/3",
            "epoch 0 node 1 group 1/3 rank 1/3",
            "epoch 0 node 2 group 2/3 rank 2/3",
            "epoch 1 node 1 group 1/3 rank 1/3",
            "epoch 1 node 2 group 2/3 rank 2/3",
            "epoch 1 node 3 group 0/3 rank 0/3",  # the spare, in node 0's seat and ranks
        ])
        self.assertIn("its standby, node 1 (", results[0][2])
        self.finish(nodes[:1])

    def test_node_0_paused_is_taken_over_and_fences_itself_when_it_wakes(self):
        # Node 0's host pauses (its distrun, sentinel and worker): nodes 1 and 2 take the job over after the
        # heartbeat timeout. When node 0 wakes it hears neither of them, a majority of the standby's epoch:
        # it kills its worker at once and leaves (75) instead of going on beside epoch 1.
        nodes = self.start_nodes([1, 1, 1], WORKER + '; echo $$ > $OUT/pid-$NODE-$DISTRUN_EPOCH',
                                 "--nnodes", "2:3", "--heartbeat-timeout", "1", env={"HOLD": "1"})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        paused = self.pause(nodes[0])
        workers = [p for p in processes_with(self.marker) if environ_has(p, "NODE=0") and p not in paused]
        for pid in workers:
            signal_if_alive(pid, signal.SIGSTOP)  # a process seen a moment ago may have ended since
        paused += workers
        try:
            self.wait_for_files("up-1-1", "up-2-1")
        finally:
            self.wake(paused)
        code, out, err = self.finish([nodes[0]])[0]
        self.assertEqual(code, 75, err)
        # Waking, it reads the others' ends in either order: the second is lost too, or late (silent for half
        # the timeout) or hardly hearing it (its queued heartbeats say so) when the first made it step down.
        self.assertRegex(err, r"fenced: this node hosts the job's coordinator but no longer hears node [12] "
                              r"\(vm\)(, node [12] \(vm\)|, and node [12] \(vm\) (sent nothing for half the heartbeat timeout|"
                              r"hardly hear it)): 2 of "
                              r"the 3 nodes of epoch 0")
        self.assertTrue(wait_for(lambda: not [p for p in processes_with(self.marker) if environ_has(p, "NODE=0")],
                                 timeout=5))
        with open(self.path("go"), "w"):
            pass
        results = self.finish(nodes[1:])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertIn("epoch 1 node 2 group 1/2 rank 1/2", self.log())
        self.assertNotIn("epoch 1 node 0", " ".join(self.log()))

    def test_node_0_and_its_standby_lost_together_end_the_job_naming_both(self):
        # The last node has nowhere to turn: it kills its workers at once (no grace period the job could
        # use) and says so once; no line then claims a grace period that never ran.
        nodes = self.start_nodes([1, 1, 1], WORKER, "--nnodes", "2:3", "--heartbeat-timeout", "1")
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[0].kill()
        nodes[1].kill()
        code, out, err = self.finish(nodes[2:])[0]
        self.assertEqual(code, 1, err)
        self.assertIn("lost the coordinator at 127.0.0.1:", err)
        self.assertIn("(its standby, after the coordinator at 127.0.0.1:", err)
        self.assertIn("killing this node's workers at once", err)
        self.assertNotIn("(--grace-period); sending SIGKILL", err)
        self.finish(nodes[:2])

    def pause(self, node):
        """Freezes a node's distrun and its sentinel, as a paused VM would; returns both pids."""
        pids = [node.pid, sentinel_of(node.pid)]
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def wake(paused):
        """Continues what pause() froze (and any workers after them): the workers, distrun, then a moment
        later its sentinel, so that distrun reads its news before the sentinel's timer runs."""
        for pid in paused[2:]:
            signal_if_alive(pid, signal.SIGCONT)
        os.kill(paused[0], signal.SIGCONT)
        time.sleep(0.5)
        os.kill(paused[1], signal.SIGCONT)

    def test_a_frozen_distrun_is_fenced_by_its_sentinel(self):
        # Node 2's distrun freezes; its sentinel hears no pulse for the heartbeat timeout and ends the
        # node's worker and distrun, while the others go on in epoch 1.
        nodes = self.start_nodes([1, 1, 1], WORKER + '; echo $$ > $OUT/pid-$NODE-$DISTRUN_EPOCH',
                                 "--nnodes", "2:3", "--heartbeat-timeout", "1", env={"HOLD": "1"})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        os.kill(nodes[2].pid, signal.SIGSTOP)
        try:
            self.wait_for_files("up-0-1", "up-1-1")
            nodes[2].wait(timeout=20)
        finally:
            if nodes[2].poll() is None:
                os.kill(nodes[2].pid, signal.SIGCONT)
        self.assertEqual(nodes[2].returncode, -signal.SIGKILL)
        # Nothing of node 2's job runs beside epoch 1 (its worker was `sh`, whose children went too).
        self.assertTrue(wait_for(lambda: not [p for p in processes_with(self.marker) if environ_has(p, "NODE=2")],
                                 timeout=5))
        with open(self.path("go"), "w"):
            pass
        results = self.finish(nodes[:2])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])

    def test_a_paused_node_is_fenced_when_it_wakes(self):
        # The whole node pauses (distrun and its sentinel): when it wakes, it hears that the job went on
        # without it, stops its workers and leaves. Epoch 1's workers stay until the test says go.
        nodes = self.start_nodes([1, 1, 1], WORKER, "--nnodes", "2:3", "--heartbeat-timeout", "1",
                                 env={"HOLD": "1"})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        paused = self.pause(nodes[2])
        try:
            self.wait_for_files("up-0-1", "up-1-1")
        finally:
            self.wake(paused)
        code, out, err = self.finish([nodes[2]])[0]
        self.assertEqual(code, 75, err)
        self.assertIn("node 2 (", err)
        self.assertIn("fenced: lost in epoch 0, and the job went on without it (now epoch 1)", err)
        self.assertIn("killing this node's workers at once", err)  # no grace period beside epoch 1
        with open(self.path("go"), "w"):
            pass
        results = self.finish(nodes[:2])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertIn("epoch 1 node 1 group 1/2 rank 1/2", self.log())
        self.assertNotIn("epoch 1 node 2", " ".join(self.log()))

    def test_a_node_paused_through_a_restart_is_fenced_when_it_rejoins(self):
        # Node 1 is killed while node 3 is paused: node 3 misses epoch 1's rendezvous, is lost for its silence,
        # and when it wakes its late join is refused.
        nodes = self.start_nodes([1, 1, 1, 1], WORKER, "--nnodes", "2:4", "--heartbeat-timeout", "1",
                                 env={"HOLD": "1"})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0", "up-3-0")
        paused = self.pause(nodes[3])
        try:
            nodes[1].kill()
            self.wait_for_files("up-0-1", "up-2-1")
        finally:
            self.wake(paused)
        code, out, err = self.finish([nodes[3]])[0]
        self.assertEqual(code, 75, err)
        self.assertIn("fenced: lost in epoch 1", err)
        with open(self.path("go"), "w"):
            pass
        results = self.finish([nodes[0], nodes[2]])
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertIn("epoch 1 node 2 group 1/2 rank 1/2", self.log())

    # --node-check: run before a node joins and before every later epoch; failing, the node leaves.
    LOG = 'echo "epoch $DISTRUN_EPOCH node $NODE group $GROUP_RANK/$GROUP_WORLD_SIZE rank $RANK/$WORLD_SIZE" >> $OUT/log'

    def test_a_node_failing_its_check_is_left_out_from_the_start(self):
        nodes = self.start_nodes([1, 1, 1], self.LOG, "--nnodes", "2:3", "--node-check", 'test "$NODE" != 2')
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [0, 0, 75], [r[2] for r in results])
        self.assertEqual(self.log(), ["epoch 0 node 0 group 0/2 rank 0/2", "epoch 0 node 1 group 1/2 rank 1/2"])
        self.assertIn("--node-check 'test \"$NODE\" != 2' failed on", results[2][2])
        self.assertIn("exit code 1; this node leaves the job (exit code 75)", results[2][2])

    def test_a_spare_takes_the_seat_of_a_node_failing_its_check(self):
        nodes = self.start_nodes([1, 1, 1], self.LOG, "--nnodes", "2:3", "--elastic-policy", "spares",
                                 "--node-check", 'test "$NODE" != 1')
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [0, 75, 0], [r[2] for r in results])
        self.assertEqual(self.log(), ["epoch 0 node 0 group 0/2 rank 0/2", "epoch 0 node 2 group 1/2 rank 1/2"])

    def test_the_check_runs_again_before_every_epoch(self):
        # Epoch 0: rank 0 fails once; before epoch 1 node 1's check fails, so epoch 1 runs on nodes 0 and 2.
        nodes = self.start_nodes(
            [1, 1, 1], self.LOG + '; if [ $DISTRUN_EPOCH = 0 ]; then if [ $NODE = 0 ]; then '
            'while [ $(wc -l < $OUT/log) -lt 3 ]; do sleep 0.05; done; exit 3; fi; sleep 60; fi',
            "--nnodes", "2:3", "--max-restarts", "1",
            "--node-check", 'test "$NODE" != 1 || test "$DISTRUN_EPOCH" = 0')
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [0, 75, 0], [r[2] for r in results])
        self.assertEqual(self.log()[3:], ["epoch 1 node 0 group 0/2 rank 0/2", "epoch 1 node 2 group 1/2 rank 1/2"])

    def test_without_a_range_a_failed_check_ends_the_job_naming_the_node(self):
        nodes = self.start_nodes([1, 1], self.LOG, "--node-check", 'test "$NODE" != 1', "--initialization-timeout",
                                 "30")
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [1, 75], [r[2] for r in results])
        self.assertIn("node 1", results[0][2])
        self.assertIn("it left the job: --node-check", results[0][2])
        self.assertFalse(os.path.exists(self.path("log")))

    def test_a_range_that_does_not_fit_the_started_nodes_is_a_usage_error(self):
        nodes = self.start_nodes([1, 1], "true", "--nnodes", "3:4")
        for code, out, err in self.finish(nodes):
            self.assertEqual(code, 2, err)
            self.assertIn("--nnodes 3:4 does not fit the 2 distrun processes", err)


class ElasticDetect(unittest.TestCase):
    def test_detect_shows_the_range_the_policy_and_the_spares(self):
        args = ["--num-nodes", "4", "--node-rank", "3", "--coordinator-address", "head:7777"]
        doc, _ = detect_json(extra_args=[*args, "--nnodes", "2:4", "--elastic-policy", "spares"])
        self.assertEqual(doc["elastic"], {"min_nodes": 2, "max_nodes": 4, "policy": "spares", "scale_up": "next-restart",
                                          "spare_nodes": "2-3", "join": None})
        self.assertEqual(doc["workers"][0]["env"]["DISTRUN_EPOCH"], "0")
        text = run(["--detect", *args, "--nnodes", "2..4", "--elastic-policy", "spares"]).stdout
        self.assertIn("elastic           2..4 nodes, policy spares; nodes 2-3 start as spares", text)
        doc, _ = detect_json(env={"DISTRUN_NNODES": "3:4"}, extra_args=args)
        self.assertEqual(doc["elastic"]["policy"], "resize")
        text = run(["--detect", "--join", "head:7777", "--nnodes", "2:4", "--run-id", "r", "--scale-up", "now"]).stdout
        self.assertIn("elastic           2..4 nodes, policy resize, scale-up now\n", text)
        self.assertIn("joins             the running job at head:7777 as a new node", text)
        doc, _ = detect_json(extra_args=args)
        self.assertIsNone(doc["elastic"])

    def test_a_malformed_range_is_a_usage_error(self):
        for value in ("3:2", "0:2", "2:", "a:b", "2-3"):
            with self.subTest(value=value):
                r = run(["--detect", "--nnodes", value])
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(f"--nnodes='{value}' is not valid; use MIN:MAX", r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


# Epoch-0 workers wait for $OUT/fail; then node 1's fails (a restart, --max-restarts) and later epochs end.
# On --change-signal (USR1) a worker writes what the key distrun/change says.
ARRIVAL_WORKER = ('trap \'"$DISTRUN" kv try-get distrun/change > $OUT/.change-$NODE; '
                  'mv $OUT/.change-$NODE $OUT/change-$NODE\' USR1; '
                  'echo "epoch $DISTRUN_EPOCH node $NODE group $GROUP_RANK/$GROUP_WORLD_SIZE rank $RANK/$WORLD_SIZE" '
                  '>> $OUT/log; echo up > $OUT/up-$NODE-$DISTRUN_EPOCH; '
                  'if [ $DISTRUN_EPOCH = 0 ]; then while [ ! -e $OUT/fail ]; do sleep 0.05; done; '
                  'if [ $NODE = 1 ]; then exit 1; fi; sleep 60; fi')


# Two nodes in epoch 0; the arrival is node 2 of 3 in epoch 1.
GROWN = ["epoch 0 node 0 group 0/2 rank 0/2", "epoch 0 node 1 group 1/2 rank 1/2",
         "epoch 1 node 0 group 0/3 rank 0/3", "epoch 1 node 1 group 1/3 rank 1/3",
         "epoch 1 node 2 group 2/3 rank 2/3"]


class Arrivals(MultiNodeCase):
    """A distrun started later with --join: admitted as a spare, or the world grows (--scale-up)."""

    RUN = ["--run-id", "elastic-arrivals"]
    TOKEN = {"DISTRUN_TOKEN": "arrivals-token"}

    def env_of(self, node):
        return self.env(OUT=self.dir, NODE=str(node), DISTRUN=DISTRUN, **self.TOKEN)

    def arrive(self, script, *extra, node=2, env=None):
        return self.popen(["--join", f"127.0.0.1:{self.port}", *self.RUN, "--nproc-per-node", "1",
                           "--grace-period", "5", *extra, "--", "sh", "-c", script],
                          env=env if env is not None else self.env_of(node))

    def log(self):
        with open(self.path("log")) as f:
            return sorted(f.read().splitlines())

    def test_an_arrival_joins_the_world_at_the_next_restart(self):
        common = ["--nnodes", "2:3", "--max-restarts", "1", "--change-signal", "USR1", *self.RUN]
        nodes = self.start_nodes([1, 1], ARRIVAL_WORKER, *common,
                                 env={"DISTRUN": DISTRUN, **self.TOKEN})
        self.wait_for_files("up-0-0", "up-1-0")
        late = self.arrive(ARRIVAL_WORKER, *common)
        # The workers hear that a change is coming and can read what it is; the spare runs nothing yet.
        self.wait_for_files("change-0", "change-1")
        with open(self.path("change-0")) as f:
            self.assertEqual(f.read().strip(), "node 2 (" + os.uname().nodename +
                             ") arrived; it joins the world at the next restart (--scale-up next-restart)")
        self.assertFalse(os.path.exists(self.path("up-2-0")))
        open(self.path("fail"), "w").close()
        results = self.finish(nodes + [late])
        self.assertEqual([r[0] for r in results], [0, 0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), GROWN)
        self.assertIn("admitted as node 2", results[2][2])
        self.assertIn("this node is a hot spare", results[2][2])
        self.assertIn("sent SIGUSR1 to 1 worker(s) (--change-signal)", results[0][2])
        self.assertIn("1 node(s) arrived: node 2", results[0][2])

    def test_scale_up_now_restarts_the_job_with_the_arrival(self):
        common = ["--nnodes", "2:3", "--scale-up", "now", *self.RUN]
        nodes = self.start_nodes([1, 1], WORKER, *common, env=self.TOKEN)
        self.wait_for_files("up-0-0", "up-1-0")
        late = self.arrive(WORKER, *common)
        results = self.finish(nodes + [late])
        self.assertEqual([r[0] for r in results], [0, 0, 0], [r[2] for r in results])
        self.assertEqual(self.log(), GROWN)
        self.assertIn("arrived and the world grows (--scale-up now); the job restarts with it in epoch 1",
                      results[1][2])
        self.assertNotIn("restarting all workers", results[0][2])  # no restart of --max-restarts

    def test_an_arrival_that_lists_the_standbys_finds_the_job_after_node_0s_loss(self):
        # Node 0 is lost and node 1 takes the job over on its --standby-port; an arrival that lists node 0's
        # address and the standbys' is refused by node 0's (gone) and admitted by node 1's.
        standby = {1: free_port(), 2: free_port()}
        common = ["--nnodes", "2:3", "--scale-up", "now", *self.RUN]
        nodes = self.start_nodes([1, 1, 1], WORKER, *common, env={"HOLD": "1", **self.TOKEN},
                                 per_node_extra={n: ["--standby-port", str(p)] for n, p in standby.items()})
        self.wait_for_files("up-0-0", "up-1-0", "up-2-0")
        nodes[0].kill()
        self.wait_for_files("up-1-1", "up-2-1")
        join = ",".join(f"127.0.0.1:{p}" for p in (self.port, standby[1], standby[2]))
        late = self.popen(["--join", join, *common, "--nproc-per-node", "1", "--grace-period", "5", "--",
                           "sh", "-c", WORKER], env=self.env(OUT=self.dir, NODE="3", HOLD="1", **self.TOKEN))
        self.wait_for_files("up-1-2", "up-2-2", "up-3-2")  # the world grew with it
        with open(self.path("go"), "w"):
            pass
        results = self.finish(nodes[1:] + [late])
        self.assertEqual([r[0] for r in results], [0, 0, 0], [r[2] for r in results])
        self.assertIn("admitted as node 3", results[2][2])
        self.assertIn("epoch 2 node 3 group 2/3 rank 2/3", self.log())
        self.finish(nodes[:1])

    def test_a_job_at_its_maximum_refuses_an_arrival_and_goes_on(self):
        script = 'echo up > $OUT/up-$NODE; while [ ! -e $OUT/go ]; do sleep 0.05; done'
        common = ["--nnodes", "2:2", *self.RUN]
        nodes = self.start_nodes([1, 1], script, *common, env=self.TOKEN)
        self.wait_for_files("up-0", "up-1")
        late = self.arrive(script, *common)
        out, err = late.communicate(timeout=30)
        self.assertEqual(late.returncode, 1, err)
        self.assertIn("the job already has 2 live nodes, the most its node range allows (--nnodes 2:2)", err)
        self.assertFalse(os.path.exists(self.path("up-2")))
        open(self.path("go"), "w").close()
        self.assertEqual([r[0] for r in self.finish(nodes)], [0, 0])

    def test_an_arrival_needs_the_range_the_run_id_and_the_token(self):
        cases = [
            (["--join", "head:7777", "--run-id", "r"], self.TOKEN, "--join needs the job's node range"),
            (["--join", "head:7777", "--nnodes", "2:3"], self.TOKEN, "--join needs the job's run id"),
            (["--join", "head:7777", "--nnodes", "2:3", "--run-id", "r"], {}, "--join needs the job's token"),
            (["--join", "head", "--nnodes", "2:3", "--run-id", "r"], self.TOKEN, "give the job's coordinator as HOST:PORT"),
        ]
        for args, env, message in cases:
            with self.subTest(args=args):
                r = run([*args, "--", "true"], env=env)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
