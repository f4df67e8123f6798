"""The hang watch across the lab's virtual hosts: one distrun per host, two torch workers (gloo) each that
report progress (distrun.progress) and all-reduce in a loop. One rank on the last host stops before an
all_reduce (asleep in a function with a telling name, or SIGSTOPped): node 0's distrun, on the first host,
declares the job hung once the least advanced rank has not moved for --hang-timeout, prints the merged
stacks that set that rank apart and name its host and pid, and every host's distrun exits 125 with no worker
left behind. `distrun stacks`, run by a worker on the first host, shows all six ranks of a healthy job
without stopping it.

Skipped, with the reason, when this distrun does not join the nodes of a job yet (see
cluster_harness.distrun_has_job_runtime)."""
import os
import re
import subprocess
import time
import unittest

from cluster_harness import DISTRUN, NODES, JobRuntimeCase, main, script_pids_on, wait_for
from python_workers import LIBRARY, module_env, python_command

HANG_TIMEOUT = 4
# How long after the stop the verdict may come: the timeout, plus the progress reports' and the watch's
# granularity (250 ms board reads, a report a second at most), with room for a loaded 2-core machine.
DETECTION_SLACK = 5
STOP_STEP = 5
PER_NODE = 2
BOUND = 90  # a job that is not stopped fails instead of running on: its workers would loop for 600 s

WORKER = """\
import json, os, signal, socket, subprocess, sys, time
import torch, torch.distributed as dist
import distrun

mode, victim, scratch, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(1)


def note(name, **fields):
    fields.update(rank=rank, host=socket.gethostname(), pid=os.getpid(), t=time.monotonic())
    with open(os.path.join(scratch, name + ".tmp"), "w") as f:
        json.dump(fields, f)
    os.rename(os.path.join(scratch, name + ".tmp"), os.path.join(scratch, name))


def rank_on_the_last_host_waits_before_all_reduce():
    time.sleep(600)


for step in range(steps):
    distrun.progress(step)
    if mode in ("sleep", "sigstop") and rank == victim and step == STOP_STEP:
        note("stopped", step=step)
        if mode == "sigstop":
            os.kill(os.getpid(), signal.SIGSTOP)
        rank_on_the_last_host_waits_before_all_reduce()
    if mode == "stacks" and rank == 0 and step == STOP_STEP:
        # The others wait in all_reduce for this rank meanwhile; the job goes on afterwards.
        began = time.monotonic()
        r = subprocess.run([os.environ["HANG_TEST_DISTRUN"], "stacks"], capture_output=True, text=True,
                           timeout=60)
        note("stacks", rc=r.returncode, stdout=r.stdout, stderr=r.stderr, seconds=time.monotonic() - began)
    dist.all_reduce(t)
    time.sleep(0.1)
assert t.item() == dist.get_world_size() ** steps, t.item()
print(f"rank {rank} done", flush=True)
""".replace("STOP_STEP", str(STOP_STEP))


class HangAcrossHosts(JobRuntimeCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not os.path.isfile(LIBRARY):
            raise unittest.SkipTest(f"no client library at {LIBRARY}")
        help_text = subprocess.run([DISTRUN, "--help"], capture_output=True, text=True).stdout
        if "--hang-timeout" not in help_text:
            raise unittest.SkipTest("distrun --help does not list --hang-timeout")

    def start(self, mode, victim=-1, steps=600):
        """srun over every lab host, one distrun each with PER_NODE workers. A shell writes each distrun's
        exit code to TASK.exit (srun reports one code for the step). TMPDIR is the scratch directory, so the
        stacks file node 0 writes goes away with it."""
        self.script = self.path("worker.py")
        with open(self.script, "w") as f:
            f.write(WORKER)
        record = '"$@"; code=$?; echo $code > "$0/$SLURM_PROCID.exit"; exit $code'
        env = self.env(**module_env(), TMPDIR=self.dir, HANG_TEST_DISTRUN=DISTRUN)
        return self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", "--output", self.path("%t.out"),
                                "--error", self.path("%t.err"), "/bin/sh", "-c", record, self.dir, DISTRUN,
                                "--nproc-per-node", str(PER_NODE), "--hang-timeout", str(HANG_TIMEOUT),
                                "--grace-period", "3", "--", *python_command(), self.script, mode, str(victim),
                                self.dir, str(steps)], env=env)

    def text(self, name):
        return self.read(name) if os.path.exists(self.path(name)) else ""

    def outputs(self):
        text = ""
        for t in range(len(NODES)):
            for kind in ("out", "err", "exit"):
                text += f"-- task {t} {kind}:\n{self.text(f'{t}.{kind}')}"
        return text

    def exits(self):
        return {t: int(self.read(f"{t}.exit")) for t in range(len(NODES)) if self.text(f"{t}.exit").strip()}

    def workers_left(self):
        return {node: script_pids_on(node, self.marker, self.script) for node in NODES
                if script_pids_on(node, self.marker, self.script)}

    def check_hang(self, mode):
        n = len(NODES)
        world = n * PER_NODE
        victim = world - 1  # local rank 1 on the last host
        p = self.start(mode, victim)
        self.wait_for_files(["stopped"], timeout=BOUND, proc=p)
        stop = self.read_json("stopped")
        self.assertEqual(stop["host"], NODES[-1])
        hung_at = None
        deadline = time.monotonic() + HANG_TIMEOUT + DETECTION_SLACK + 10
        while time.monotonic() < deadline and hung_at is None:
            if "error: hung:" in self.text("0.err"):
                hung_at = time.monotonic()
            time.sleep(0.02)
        # A stopped worker that distrun failed to end is SIGKILLed by tearDown, which ends it all the same.
        out, err = p.communicate(timeout=BOUND)
        everything = self.outputs() + f"-- srun exited {p.returncode}\n{out}{err}"
        self.assertIsNotNone(hung_at, "node 0 did not declare the job hung\n" + everything)
        delay = hung_at - stop["t"]
        self.assertLessEqual(delay, HANG_TIMEOUT + DETECTION_SLACK,
                             f"hung declared {delay:.2f}s after the stop\n" + everything)
        self.assertGreaterEqual(delay, HANG_TIMEOUT - 0.5,
                                f"hung declared {delay:.2f}s after the stop, before the timeout\n" + everything)

        # Every host's distrun ended with 125, and srun says so for the step.
        self.assertTrue(wait_for(lambda: len(self.exits()) == n, timeout=10), everything)
        self.assertEqual(self.exits(), {t: 125 for t in range(n)}, everything)
        self.assertEqual(p.returncode, 125, everything)

        # Node 0 (the first host) prints the verdict, the merged picture and the rank it sets apart.
        err0 = self.read("0.err")
        self.assertRegex(err0, rf"distrun: error: hung: no progress for [\d.]+s \(--hang-timeout {HANG_TIMEOUT}s\); "
                               rf"every rank reported step {STOP_STEP} last", everything)
        self.assertIn(f"stacks of {world} ranks", err0, everything)
        majority = f"[{world - 1}] ranks 0-{world - 2}"
        self.assertRegex(err0, rf"\|- {re.escape(majority)}\s.*\n.*all_reduce", everything)
        odd = re.search(rf"`- \[1\] ranks {victim}\b(.*)", err0)
        self.assertIsNotNone(odd, everything)
        if mode == "sleep":
            self.assertIn("rank_on_the_last_host_waits_before_all_reduce", err0[odd.start():], everything)
        else:
            self.assertIn(f"pid {stop['pid']} is stopped (state T)", odd.group(1), everything)
        self.assertRegex(err0, rf"odd ranks \(the majority is {re.escape(majority)}\)", everything)
        self.assertRegex(err0, rf"rank {victim} \(host {NODES[-1]}, pid {stop['pid']}[,)]", everything)
        stacks_file = re.search(r"every stack: (\S+)", err0)
        self.assertIsNotNone(stacks_file, everything)
        self.assertTrue(stacks_file.group(1).startswith(self.dir + "/"), everything)
        with open(stacks_file.group(1)) as f:
            dump = f.read()
        for r in range(world):
            self.assertRegex(dump, rf"== rank {r} \(host {NODES[r // PER_NODE]}, pid \d+", dump)
        self.assertRegex(err0, rf"the job stopped: rank {victim} on node {n - 1} \([^)]*\): hung: .*; the stacks "
                               rf"set apart rank {victim} \({NODES[-1]}, pid {stop['pid']}\)", everything)
        # Every other host's distrun says why its workers were stopped.
        for t in range(1, n):
            self.assertIn("hung: no progress", self.read(f"{t}.err"), f"task {t}\n{everything}")

        # No worker is left on any host (tearDown checks every process of the job as well).
        self.assertTrue(wait_for(lambda: not self.workers_left(), timeout=10),
                        f"workers left: {self.workers_left()}\n{everything}")

    def test_a_sleeping_rank_on_the_last_host_is_set_apart_and_every_host_exits_125(self):
        self.check_hang("sleep")

    def test_a_sigstopped_rank_on_the_last_host_is_named_as_stopped_and_every_host_exits_125(self):
        self.check_hang("sigstop")

    def test_distrun_stacks_on_the_first_host_shows_every_rank_of_a_healthy_job(self):
        n = len(NODES)
        world = n * PER_NODE
        p = self.start("stacks", steps=STOP_STEP + 5)
        out, err = p.communicate(timeout=BOUND)
        everything = self.outputs() + f"-- srun exited {p.returncode}\n{out}{err}"
        self.assertEqual(p.returncode, 0, everything)
        self.assertEqual(self.exits(), {t: 0 for t in range(n)}, everything)
        done = sorted(int(m) for t in range(n) for m in re.findall(r"rank (\d+) done", self.read(f"{t}.out")))
        self.assertEqual(done, list(range(world)), everything)
        said = self.read_json("stacks")
        picture = said["stdout"] + said["stderr"]
        self.assertEqual((said["rc"], said["host"]), (0, NODES[0]), picture)
        self.assertIn(f"stacks of {world} ranks ({world} with a stack)", picture)
        # Every rank is in one branch of the tree: the branches' rank counts add up to the world.
        branches = re.findall(r"^[|`]- \[(\d+)\] ranks ([\d,-]+)", picture, re.M)
        ranks = []
        for _, spec in branches:
            for part in spec.split(","):
                lo, _, hi = part.partition("-")
                ranks += range(int(lo), int(hi or lo) + 1)
        self.assertEqual(sorted(ranks), list(range(world)), picture)
        self.assertEqual(sum(int(count) for count, _ in branches), world, picture)
        # Rank 0 (in `distrun stacks` itself, waiting on its answer) is the odd one, on the first host.
        self.assertRegex(picture, rf"rank 0 \(host {NODES[0]}, pid {said['pid']}[,)]")
        self.assertNotIn("hung", self.read("0.err"), everything)


if __name__ == "__main__":
    main()
