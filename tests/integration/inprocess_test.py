"""Recovering in place (--recovery in-process) with real PyTorch workers (gloo) and several distrun processes
on this machine, each one node: a lost node's seat goes to a warm spare whose workers waited with their
imports done, a failed worker starts again alone, a frozen node is left behind, a script that never calls
recover() is started again; in each the survivors keep their processes, every rank's state is the same at
every step, and no step is lost beyond the one in flight."""
import collections
import json
import os
import signal
import subprocess
import threading
import time
import unittest
import urllib.request

import cdp
from distrun_harness import DISTRUN
from launch_helpers import wait_for
from multi_node import MultiNodeCase, free_port
from python_workers import LIBRARY, ROOT, cache_value, module_env, python_command

WORKER = os.path.join(os.path.dirname(__file__), "inprocess_worker.py")
EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "inprocess_ddp.py")
# Two seconds, not one: a node of a machine under load (a build beside the suite) may go a second unheard.
FAST = ["--heartbeat-timeout", "2", "--recovery", "in-process"]

# A worker in C (the client library's distrun_recovery_*): it takes its world, and the next one after a
# notice, printing each; the worker of FAIL_RANK exits 3 in generation 0, and its process started again
# ends once it holds a later world.
C_WORKER = r"""
#include <distrun/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void show(const distrun_world* w) {
  const char* rank_variable = "";
  for (size_t i = 0; i < w->env_count; ++i) {
    if (w->env[i][0] == 'R' && w->env[i][1] == 'A' && w->env[i][4] == '=') rank_variable = w->env[i];
  }
  printf("gen %d rank %d/%d new %d pid %d source %d lost %zu joined %zu prefix %s %s\n", w->generation, w->rank,
         w->world_size, w->is_new, (int)getpid(), w->source, w->lost_count, w->joined_count, w->store_prefix,
         rank_variable);
  fflush(stdout);
}

int main(void) {
  char error[512];
  distrun_recovery* r = distrun_recovery_open(error, sizeof error);
  if (!r) {
    fprintf(stderr, "open: %s\n", error);
    return 2;
  }
  distrun_world w;
  if (distrun_recovery_wait_world(r, 0, 30000, &w) != 0) return 4;
  show(&w);
  const int held = w.generation;
  const char* fail = getenv("FAIL_RANK");
  const int failing = fail && atoi(fail) == w.rank && held == 0;
  distrun_world_free(&w);
  if (failing) {
    usleep(300000);
    distrun_recovery_close(r);
    return 3;
  }
  if (held > 0) {
    distrun_recovery_close(r);
    return 0;
  }
  distrun_recovery_up(r, held);
  int next = -1;
  if (distrun_recovery_wait_change(r, held, 30000, &next) != 0) return 5;
  distrun_recovery_ready(r, next);
  if (distrun_recovery_wait_world(r, next, 30000, &w) != 0) return 6;
  show(&w);
  distrun_recovery_up(r, w.generation);
  distrun_world_free(&w);
  distrun_recovery_close(r);
  return 0;
}
"""


class Log:
    """inprocess_worker.py's lines: (generation, step, rank, pid, sum, new, world)."""

    def __init__(self, path):
        self.rows = []
        with open(path) as f:
            for line in f:
                w = line.split()
                self.rows.append(dict(gen=int(w[1]), step=int(w[3]), rank=int(w[5]), pid=int(w[7]), sum=w[9],
                                      new=int(w[11]), world=int(w[13])))

    def pids(self, gen, rank):
        return {r["pid"] for r in self.rows if r["gen"] == gen and r["rank"] == rank}

    def check_consistent(self, case):
        """Every rank agrees on the state at every step of every generation, and the steps of each
        generation follow on from the last one's (at most the step in flight done again)."""
        by_step = collections.defaultdict(set)
        for r in self.rows:
            by_step[(r["gen"], r["step"])].add(r["sum"])
        for key, sums in by_step.items():
            case.assertEqual(len(sums), 1, f"ranks disagree at generation/step {key}: {sums}")
        gens = sorted({r["gen"] for r in self.rows})
        for before, after in zip(gens, gens[1:]):
            last = max(r["step"] for r in self.rows if r["gen"] == before)
            first = min(r["step"] for r in self.rows if r["gen"] == after)
            case.assertIn(first, (last, last + 1), f"generation {after} began at step {first}, {before} ended at {last}")
            # A step done in both generations gives the same state in both.
            if first == last:
                case.assertEqual(by_step[(before, last)], by_step[(after, first)])


class InProcess(MultiNodeCase):
    def start(self, counts, *extra, env=None, **kwargs):
        script = " ".join(python_command()) + " " + WORKER
        return self.start_nodes(counts, f"exec {script}", *FAST, *extra,
                                env=module_env(**{"STEPS": "60", **(env or {})}), **kwargs)

    def log(self):
        return Log(self.path("log"))

    def steps_done(self, n):
        def done():
            try:
                return len(self.log().rows) >= n
            except (OSError, IndexError, ValueError):
                return False
        self.assertTrue(wait_for(done, timeout=60), "the workers did not step")

    def test_a_lost_nodes_seat_goes_to_a_warm_spare_and_the_survivors_keep_their_processes(self):
        nodes = self.start([1, 1, 1], "--nnodes", "2:3", "--elastic-policy", "spares")
        self.steps_done(6)
        log = self.log()
        survivor = log.pids(0, 0)
        self.assertEqual(len(survivor), 1)
        nodes[1].kill()  # its sentinel ends its worker; the survivor's all_reduce fails
        results = self.finish([nodes[0], nodes[2]], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(sorted({r["gen"] for r in log.rows}), [0, 1])
        self.assertEqual(log.pids(1, 0), survivor, "rank 0 kept its process")
        joined = [r for r in log.rows if r["gen"] == 1 and r["rank"] == 1]
        self.assertTrue(joined and all(r["new"] == 1 for r in joined), "rank 1 is the spare's new process")
        self.assertEqual(max(r["step"] for r in log.rows), 60)
        self.assertIn("recovered in place", results[0][2])

    def test_a_spares_worker_still_starting_takes_the_seat_without_a_restart(self):
        # The spare's worker has not spoken to its distrun when node 1 is lost (as one still importing torch):
        # it is not started again, and takes rank 1 with its first process when it says hello.
        nodes = self.start([1, 1, 1], "--nnodes", "2:3", "--elastic-policy", "spares", "--recovery-timeout", "60",
                           env={"SLOW_SPARE_NODE": "2", "DISTRUN": DISTRUN})
        self.steps_done(6)
        survivor = self.log().pids(0, 0)
        nodes[1].kill()
        results = self.finish([nodes[0], nodes[2]], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(log.pids(1, 0), survivor, "rank 0 kept its process")
        with open(self.path("starts")) as f:
            starts = [int(pid) for pid in f.read().split()]
        self.assertEqual(len(starts), 1, "the spare's worker was started once: " + results[1][2])
        self.assertEqual(log.pids(1, 1), set(starts))
        self.assertNotIn("never spoke", results[1][2])

    def test_a_failed_worker_starts_again_alone(self):
        nodes = self.start([2, 1], "--max-restarts", "2", env={"FAIL_AT": "1:5"})
        results = self.finish(nodes, timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(sorted({r["gen"] for r in log.rows}), [0, 1])
        for rank in (0, 2):
            self.assertEqual(log.pids(0, rank), log.pids(1, rank), f"rank {rank} kept its process")
        self.assertNotEqual(log.pids(0, 1), log.pids(1, 1))
        self.assertIn("starting it again alone", results[0][2])

    def test_a_killed_worker_starts_again_alone(self):
        nodes = self.start([2, 1], "--max-restarts", "1")
        self.steps_done(9)
        victim = self.log().pids(0, 1).pop()
        os.kill(victim, signal.SIGKILL)
        results = self.finish(nodes, timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        for rank in (0, 2):
            self.assertEqual(log.pids(0, rank), log.pids(1, rank), f"rank {rank} kept its process")
        self.assertNotIn(victim, log.pids(1, 1))
        self.assertIn("signal SIGKILL; starting it again alone", results[0][2])

    def test_resize_renumbers_the_survivors_in_place(self):
        nodes = self.start([1, 1, 1], "--nnodes", "2:3")
        self.steps_done(9)
        before = {rank: self.log().pids(0, rank) for rank in range(3)}
        nodes[1].kill()
        results = self.finish([nodes[0], nodes[2]], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual({r["world"] for r in log.rows if r["gen"] == 1}, {2})
        self.assertEqual(log.pids(1, 0), before[0])
        self.assertEqual(log.pids(1, 1), before[2], "launch node 2's worker is rank 1 now, in its own process")

    def test_a_frozen_node_is_left_behind_and_its_blocked_peers_released(self):
        # Node 1's distrun and worker stop; the survivors' all_reduce blocks on it until distrun's notice
        # (after --heartbeat-timeout) releases it, and the spare takes the seat.
        nodes = self.start([1, 1, 1], "--nnodes", "2:3", "--elastic-policy", "spares")
        self.steps_done(6)
        frozen = self.log().pids(0, 1).pop()
        os.kill(nodes[1].pid, signal.SIGSTOP)
        os.kill(frozen, signal.SIGSTOP)
        results = self.finish([nodes[0], nodes[2]], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        # Its sentinel heard nothing from it for the heartbeat timeout: the frozen node is fenced, its worker
        # and distrun killed, before the next generation's world formed (no worker of it ran beside it).
        nodes[1].wait(timeout=20)
        self.assertEqual(nodes[1].returncode, -signal.SIGKILL)
        self.assertFalse(os.path.exists(f"/proc/{frozen}"))
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(log.pids(1, 0), log.pids(0, 0))
        self.assertNotIn(frozen, log.pids(1, 1))

    def test_a_worker_that_never_recovers_is_started_again_after_the_recovery_timeout(self):
        nodes = self.start([2, 1], "--max-restarts", "2", "--recovery-timeout", "2",
                           env={"FAIL_AT": "2:5", "HANG_AT": "1:3"})
        results = self.finish(nodes, timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(log.pids(0, 0), log.pids(1, 0))
        self.assertIn("rank 1 (pid", results[0][2])
        self.assertIn("did not call distrun.torch.recover()", results[0][2])

    def test_node_0_lost_its_standby_takes_over_and_the_survivors_keep_their_processes(self):
        # The standby takes over with a majority of the last epoch's 3 nodes; the spare takes node 0's seat.
        nodes = self.start([1, 1, 1, 1], "--nnodes", "3:4", "--elastic-policy", "spares")
        self.steps_done(9)
        survivors = {rank: self.log().pids(0, rank) for rank in (1, 2)}
        nodes[0].kill()
        results = self.finish(nodes[1:], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        for rank in (1, 2):
            self.assertEqual(log.pids(1, rank), survivors[rank], f"rank {rank} kept its process through node 0's loss")
        self.assertTrue(all(r["new"] == 1 for r in log.rows if r["gen"] == 1 and r["rank"] == 0))
        self.assertIn("took over", "".join(r[2] for r in results))

    def test_a_worker_in_c_recovers_in_place_through_the_client_library(self):
        source = self.path("worker.c")
        with open(source, "w") as f:
            f.write(C_WORKER)
        program = self.path("worker")
        flags = ["-fsanitize=address,undefined"] if cache_value("DISTRUN_SANITIZE") == "ON" else []
        subprocess.run(["cc", *flags, "-o", program, source, "-I", os.path.join(ROOT, "runtime", "include"), LIBRARY,
                        "-Wl,-rpath," + os.path.dirname(LIBRARY)], check=True)
        nodes = self.start_nodes([2], program, *FAST, "--max-restarts", "1",
                                 env={"FAIL_RANK": "1", "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "")})
        code, out, err = self.finish(nodes, timeout=60)[0]
        self.assertEqual(code, 0, err)
        lines = sorted(l.split("] ", 1)[1] for l in out.splitlines() if "gen " in l)
        pid0 = lines[0].split()[7]
        self.assertRegex(lines[0], r"^gen 0 rank 0/2 new 1 pid \d+ source -1 lost 0 joined 0 prefix distrun/g0 RANK=0$")
        self.assertRegex(lines[1], r"^gen 0 rank 1/2 new 1 pid \d+ ")
        # Rank 0 kept its process; rank 1's new process took generation 1's world as new, from source 0.
        self.assertEqual(lines[2], f"gen 1 rank 0/2 new 0 pid {pid0} source 0 lost 1 joined 1 prefix distrun/g1 RANK=0")
        self.assertRegex(lines[3], r"^gen 1 rank 1/2 new 1 pid \d+ source 0 lost 1 joined 1 prefix distrun/g1 RANK=1$")

    def test_the_ddp_example_survives_a_lost_node_with_every_rank_equal(self):
        script = " ".join(python_command()) + " " + EXAMPLE + " --steps 200 --step-seconds 0.02"
        nodes = self.start_nodes([2, 2, 2], f"exec {script}", *FAST, "--nnodes", "2:3", "--elastic-policy", "spares",
                                 env=module_env())
        lines = []
        reader = threading.Thread(target=lambda: lines.extend(nodes[0].stdout), daemon=True)
        reader.start()
        self.assertTrue(wait_for(lambda: any("step 50 " in l for l in lines), timeout=60), lines)
        nodes[1].kill()
        code0 = nodes[0].wait(timeout=120)
        reader.join(timeout=10)
        err0 = nodes[0].stderr.read()
        code2, out2, err2 = self.finish([nodes[2]], timeout=120)[0]
        self.assertEqual([code0, code2], [0, 0], [err0, err2])
        out = "".join(lines) + out2
        final = [l.split("] ", 1)[1] for l in out.splitlines() if "checksum" in l]
        self.assertEqual(len(final), 4, out)
        self.assertEqual(len({l.split("checksum")[1] for l in final}), 1, final)
        self.assertTrue(all("step 200" in l and "generation 1" in l for l in final), final)
        self.assertIn("state from rank 0", out)

    def test_node_0_shows_each_recovery_in_its_metrics_and_page(self):
        metrics = free_port()
        nodes = self.start([1, 1], "--max-restarts", "1", "--metrics-address", f"127.0.0.1:{metrics}",
                           env={"STEPS": "400", "STEP_SECONDS": "0.02"})
        self.steps_done(6)
        os.kill(self.log().pids(0, 1).pop(), signal.SIGKILL)

        def job():
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/job.json", timeout=10) as r:
                return json.loads(r.read())
        self.assertTrue(wait_for(lambda: any(r["complete"] for r in job()["recoveries"]), timeout=60), job())
        [record] = job()["recoveries"]
        self.assertEqual((record["generation"], record["in_place"], record["lost"], record["joined"], record["source"]),
                         (1, True, [1], [1], 0), record)
        self.assertEqual(sorted(record["phases_s"]), ["agreed", "first_step", "group_up", "notified", "ready"])
        self.assertIn("generation 1 recovered in place in ", record["text"])
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=10) as r:
            text = r.read().decode()
        self.assertIn('distrun_recoveries_total{mode="in-process"} 1\n', text)
        self.assertIn('distrun_last_recovery_seconds{phase="first_step"} ', text)
        # The page, in headless Chromium: the recovery marked on epoch 1's track and listed with its phases.
        with cdp.Chromium() as browser:
            browser.navigate(f"http://127.0.0.1:{metrics}/")
            browser.wait_for("document.querySelectorAll('#recoveries li[data-generation]').length === 1", timeout=30)
            item = browser.evaluate("document.querySelector('#recoveries li[data-generation]').textContent")
            self.assertIn("generation 1 recovered in place in ", item)
            self.assertIn("first step", item)
            self.assertEqual(browser.evaluate("document.querySelectorAll('#timeline .mark').length"), 1)
            self.assertEqual(browser.console_errors(), [])
        results = self.finish(nodes, timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        self.assertIn("generation 1 recovered in place in ", results[0][2])

    def test_a_node_that_arrives_replaces_the_spare_used_up(self):
        # Node 1 lost: the spare (node 2) takes its seat. A node that arrives (--join) is the next spare, its
        # worker waiting warm; node 2 lost in turn: the arrival's worker takes the seat, rank 0 still its first
        # process.
        run = ["--nnodes", "2:3", "--elastic-policy", "spares", "--run-id", "inplace-arrival"]
        token = {"DISTRUN_TOKEN": "inplace-arrival-token"}
        nodes = self.start([1, 1, 1], *run, env={"STEPS": "600", "STEP_SECONDS": "0.02", **token})
        self.steps_done(6)
        first = self.log().pids(0, 0)
        nodes[1].kill()
        self.assertTrue(wait_for(lambda: max(r["gen"] for r in self.log().rows) == 1, timeout=60))
        script = " ".join(python_command()) + " " + WORKER
        late = self.popen(["--join", f"127.0.0.1:{self.port}", *run, "--nproc-per-node", "1", *FAST, "--",
                           "sh", "-c", f"exec {script}"],
                          env=self.env(**module_env(OUT=self.dir, STEPS="600", STEP_SECONDS="0.02", **token)))
        # Its worker is warm (connected, waiting) once its distrun logs it is a spare of the running generation.
        time.sleep(4)
        nodes[2].kill()
        self.assertTrue(wait_for(lambda: max(r["gen"] for r in self.log().rows) == 2, timeout=60), self.log().rows[-3:])
        results = self.finish([nodes[0], late], timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        log.check_consistent(self)
        self.assertEqual(log.pids(2, 0), first)
        arrived = [r for r in log.rows if r["gen"] == 2 and r["rank"] == 1]
        self.assertTrue(arrived and arrived[0]["new"] == 1)
        self.assertIn("admitted as node 3", results[1][2])

    def test_the_same_script_runs_under_restart(self):
        nodes = self.start_nodes([1, 1], "exec " + " ".join(python_command()) + " " + WORKER,
                                 "--max-restarts", "1", env=module_env(STEPS="20", FAIL_AT="1:5"))
        results = self.finish(nodes, timeout=120)
        self.assertEqual([r[0] for r in results], [0, 0], [r[2] for r in results])
        log = self.log()
        self.assertNotEqual(log.pids(0, 0), log.pids(1, 0), "restart: every worker is a new process")
        self.assertEqual(max(r["step"] for r in log.rows), 20)


if __name__ == "__main__":
    unittest.main()
