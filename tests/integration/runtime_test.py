"""Job-wide supervision through the runtime, with several real distrun processes on this machine: each is one
node of a job (explicit --num-nodes/--node-rank and one coordinator address), node 0 hosts the service and
every distrun is an agent. Rendezvous, failure propagation, lost agents and coordinator, frozen agents,
job-wide restarts and completion."""
import os
import re
import resource
import signal
import time
import unittest

from multi_node import MultiNodeCase, free_port


class MultiAgent(MultiNodeCase):
    def test_rendezvous_with_uneven_worker_counts(self):
        nodes = self.start_nodes(
            [1, 2, 3], 'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK node=$GROUP_RANK '
                       'master=$MASTER_ADDR:$MASTER_PORT coord=$DISTRUN_COORDINATOR_ADDRESS"')
        results = self.finish(nodes)
        seen = {}
        for node, (code, out, err) in enumerate(results):
            self.assertEqual(code, 0, err)
            for m in re.finditer(r"rank=(\d+) world=(\d+) local=(\d+) node=(\d+) master=(\S+) coord=(\S+)", out):
                seen[int(m.group(1))] = (int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5), m.group(6))
        self.assertEqual(sorted(seen), [0, 1, 2, 3, 4, 5])
        self.assertEqual({v[0] for v in seen.values()}, {6})
        # Prefix sums: node 0 has rank 0, node 1 ranks 1-2, node 2 ranks 3-5.
        self.assertEqual([seen[r][2] for r in range(6)], [0, 1, 1, 2, 2, 2])
        self.assertEqual([seen[r][1] for r in range(6)], [0, 0, 1, 0, 1, 2])
        self.assertEqual(len({v[3] for v in seen.values()}), 1, "one MASTER_ADDR:MASTER_PORT for all")
        self.assertEqual({v[4] for v in seen.values()}, {f"127.0.0.1:{self.port}"})

    def test_node_0_raises_its_descriptor_limit_and_workers_keep_the_original(self):
        # Node 0 serves every agent and worker of the job, so it runs at its hard descriptor limit; every
        # worker still gets the soft limit distrun was started with.
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 1024:
            self.skipTest(f"the hard descriptor limit here is {hard}: nothing to raise")
        script = ('echo "soft=$(ulimit -Sn)"; '
                  'grep "^Max open files" /proc/$PPID/limits | awk "{print \\$4, \\$5}" > $OUT/limits-$NODE')
        lowered = lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        nodes = self.start_nodes([1, 1], script, preexec_fn=lowered)
        results = self.finish(nodes)
        for code, out, err in results:
            self.assertEqual(code, 0, err)
            self.assertIn("soft=1024", out)
        limit = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
        with open(self.path("limits-0")) as f:
            self.assertEqual(f.read().split(), [limit, limit], "node 0 runs at its hard limit")
        with open(self.path("limits-1")) as f:
            self.assertEqual(f.read().split(), ["1024", limit], "the other nodes keep theirs")

    def test_worker_failure_on_node_2_ends_every_node_with_its_code(self):
        nodes = self.start_nodes(
            [2, 2, 2], 'if [ $NODE = 2 ] && [ $LOCAL_RANK = 1 ]; then sleep 0.5; echo "dying" >&2; exit 7; fi; '
                       'trap "echo term-$RANK > $OUT/term-$RANK; exit 143" TERM; sleep 60 & wait')
        start = time.monotonic()
        results = self.finish(nodes)
        elapsed = time.monotonic() - start
        self.assertEqual([r[0] for r in results], [7, 7, 7], [r[2] for r in results])
        self.assertLess(elapsed, 30, "the other nodes were not stopped promptly")
        # The root cause's node prints the failure summary with the worker's last words; the others name it.
        self.assertIn("rank 5 failed first", results[2][2])
        self.assertIn("dying", results[2][2])
        for code, out, err in results[:2]:
            self.assertIn("the job stopped: rank 5 on node 2", err)
            self.assertIn("exit code 7", err)
        # Every other worker got SIGTERM and could clean up.
        for rank in [0, 1, 2, 3, 4]:
            self.assertTrue(os.path.exists(self.path(f"term-{rank}")), f"rank {rank} got no SIGTERM")

    def test_every_node_exits_0_promptly_when_all_workers_succeed(self):
        nodes = self.start_nodes([1, 2], 'sleep 0.$((RANK * 3)); echo done-$RANK')
        results = self.finish(nodes, timeout=30)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        out = "".join(r[1] for r in results)
        for rank in range(3):
            self.assertIn(f"done-{rank}", out)

    def test_sigkill_of_an_agent_ends_the_job(self):
        nodes = self.start_nodes([1, 1, 1], 'echo up > $OUT/up-$RANK; sleep 60')
        self.wait_for_files("up-0", "up-1", "up-2")
        nodes[1].kill()
        results = self.finish([nodes[0], nodes[2]], timeout=30)
        for code, out, err in results:
            self.assertNotEqual(code, 0, err)
            self.assertIn("node 1", err)
            self.assertIn("lost", err)

    def test_sigkill_of_the_coordinator_ends_the_job(self):
        nodes = self.start_nodes([1, 1, 1], 'echo up > $OUT/up-$RANK; sleep 60')
        self.wait_for_files("up-0", "up-1", "up-2")
        nodes[0].kill()
        results = self.finish(nodes[1:], timeout=30)
        for code, out, err in results:
            self.assertEqual(code, 1, err)
            self.assertIn(f"lost the coordinator at 127.0.0.1:{self.port}", err)

    def test_a_frozen_agent_is_lost_after_the_heartbeat_timeout(self):
        nodes = self.start_nodes([1, 1, 1], 'echo up > $OUT/up-$RANK; sleep 60', "--heartbeat-timeout", "1")
        self.wait_for_files("up-0", "up-1", "up-2")
        os.kill(nodes[2].pid, signal.SIGSTOP)
        try:
            start = time.monotonic()
            results = self.finish(nodes[:2], timeout=30)
            elapsed = time.monotonic() - start
        finally:
            os.kill(nodes[2].pid, signal.SIGKILL)
        self.assertLess(elapsed, 20)
        for code, out, err in results:
            self.assertEqual(code, 1, err)
            self.assertIn("node 2", err)
            self.assertIn("heartbeat", err)

    def test_restarts_start_every_nodes_workers_again(self):
        nodes = self.start_nodes(
            [1, 2], 'echo "round $DISTRUN_RESTART_COUNT rank $RANK" >> $OUT/log-$RANK; '
                    # Rank 2 fails once every round-0 worker has logged, so none is stopped before it ran.
                    'if [ $RANK = 2 ] && [ $DISTRUN_RESTART_COUNT = 0 ]; then '
                    'while [ ! -s $OUT/log-0 ] || [ ! -s $OUT/log-1 ]; do sleep 0.05; done; exit 3; fi; '
                    'if [ $DISTRUN_RESTART_COUNT = 0 ]; then sleep 60; fi; echo ok',
            "--max-restarts", "2")
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        for rank in range(3):
            with open(self.path(f"log-{rank}")) as f:
                self.assertEqual(f.read().split("\n")[:2], [f"round 0 rank {rank}", f"round 1 rank {rank}"])
        self.assertIn("restarting", results[0][2])

    def test_restarts_exhausted_end_with_the_root_causes_code(self):
        nodes = self.start_nodes([1, 1], 'if [ $RANK = 1 ]; then exit 4; fi; sleep 60', "--max-restarts", "1")
        results = self.finish(nodes)
        self.assertEqual([r[0] for r in results], [4, 4], [r[2] for r in results])

    def test_rendezvous_timeout_names_the_missing_node(self):
        port = free_port()
        p = self.popen(["--num-nodes", "3", "--node-rank", "0", "--coordinator-address", f"127.0.0.1:{port}",
                        "--initialization-timeout", "1", "--", "true"])
        q = self.popen(["--num-nodes", "3", "--node-rank", "2", "--coordinator-address", f"127.0.0.1:{port}",
                        "--initialization-timeout", "1", "--", "true"])
        for proc in (p, q):
            out, err = proc.communicate(timeout=30)
            self.assertEqual(proc.returncode, 1, err)
            self.assertIn("missing: node 1", err)

    def test_a_node_started_twice_is_refused(self):
        port = free_port()
        args = ["--num-nodes", "3", "--coordinator-address", f"127.0.0.1:{port}", "--initialization-timeout",
                "3", "--", "true"]
        procs = [self.popen(["--node-rank", r] + args) for r in ["0", "1"]]
        time.sleep(0.5)  # the first node 1 joins before the second
        procs.append(self.popen(["--node-rank", "1"] + args))
        results = [p.communicate(timeout=30) for p in procs]
        self.assertEqual([p.returncode for p in procs], [1, 1, 1], results)
        self.assertTrue(any("node 1" in err and "same node rank" in err for _, err in results), results)

    def test_a_second_coordinator_on_the_port_is_refused(self):
        port = free_port()
        args = ["--num-nodes", "2", "--node-rank", "0", "--coordinator-address", f"127.0.0.1:{port}",
                "--initialization-timeout", "3", "--", "true"]
        first = self.popen(args)
        time.sleep(0.5)
        second = self.popen(args)
        out, err = second.communicate(timeout=30)
        self.assertEqual(second.returncode, 1, err)
        self.assertIn(f"cannot listen on 127.0.0.1:{port}", err)
        self.assertIn("--coordinator-port", err)
        first.communicate(timeout=30)

    def test_a_node_without_the_port_is_told_to_give_one(self):
        p = self.popen(["--num-nodes", "2", "--node-rank", "1", "--coordinator-address", "127.0.0.1", "--",
                        "true"])
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 2, err)
        self.assertIn("--coordinator-port", err)


    def test_a_malformed_token_is_a_usage_error_before_any_worker_starts(self):
        # The token travels in gRPC metadata and in the agent channel's hello: printable, at most 4096.
        marker = self.path("started")
        for token in ["two words", "x" * 4097]:
            p = self.popen(["--nproc-per-node", "2", "--", "sh", "-c", f"touch {marker}"],
                           env=self.env(DISTRUN_TOKEN=token))
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("DISTRUN_TOKEN", err)
            self.assertNotIn(token, err, "the token itself is never shown")
            self.assertFalse(os.path.exists(marker), "no worker may start")

if __name__ == "__main__":
    unittest.main()
