"""The hang watch with real workers: progress reports (distrun.progress, distrun progress, distrun_progress),
a rank that stops moving makes the job hung after --hang-timeout, the stacks of every worker are merged into
one picture that sets the odd rank apart, the job stops with exit code 125 (or restarts), and nothing is left
running; ranks that never report are not watched; distrun stacks and distrun status on a running job; the
stall warning for jobs without reports. Every test's processes carry a unique marker (launch_helpers)."""
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distrun_harness import DISTRUN, run  # noqa: E402
from launch_helpers import PYTHON, LaunchCase, processes_with, wait_for  # noqa: E402
from python_workers import (LIBRARY, ROOT, asan_options_without_leak_check, cache_value, module_env,  # noqa: E402
                            python_command)

HANG_EXIT = 125


def torch_available():
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"
    return subprocess.run([PYTHON, "-c", probe], capture_output=True).returncode == 0


# Four gloo workers that report each step; at step 5 rank 3 stops before the all_reduce the others wait in:
# asleep in a function with a distinctive name (HANG=sleep) or stopped by SIGSTOP (HANG=stop).
TORCH_HANG = """\
import os, signal, sys, time
import torch, torch.distributed as dist
import distrun
dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.ones(4)
for step in range(1000):
    distrun.progress(step)
    if rank == 3 and step == 5:
        print("rank 3 stops at %.3f pid %d" % (time.time(), os.getpid()), flush=True)
        if os.environ["HANG"] == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)
        def stuck_before_all_reduce():
            time.sleep(3600)
        stuck_before_all_reduce()
    dist.all_reduce(t)
    time.sleep(0.05)
"""

# Four healthy gloo workers; at step 10 rank 0 asks for the job's stacks and status from inside (its results
# go to files in OUT) and the job goes on to its end.
TORCH_HEALTHY = """\
import os, subprocess, sys, time
import torch, torch.distributed as dist
import distrun
dist.init_process_group("gloo")
rank = dist.get_rank()
out = os.environ["OUT"]
t = torch.ones(4, dtype=torch.float64)

def ask(name, *args):
    r = subprocess.run([os.environ["DISTRUN"], *args], capture_output=True, text=True, timeout=60)
    with open(os.path.join(out, name), "w") as f:
        f.write("rc %d\\n%s\\n--- stderr\\n%s" % (r.returncode, r.stdout, r.stderr))

for step in range(20):
    distrun.progress(step)
    if rank == 0 and step == 10:
        ask("stacks", "stacks", "--output", os.path.join(out, "stacks-full.txt"))
        ask("stacks-full", "stacks", "--full")
        # Every rank reported step 10 and waits for rank 0: a node sends progress at most once a second.
        time.sleep(1.5)
        ask("status", "status")
    dist.all_reduce(t)
    time.sleep(0.05)
print("done rank %d sum %d" % (rank, int(t[0].item())), flush=True)
"""

# A native worker: a thread holds the mutex forever, and after steps 0..3 the main thread waits for it in
# stuck_on_the_mutex. Reports through the C API.
C_DEADLOCK = r"""
#include <distrun/client.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t held;

static void* hold_the_mutex(void* arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  pthread_barrier_wait(&held);
  for (;;) pause();
  return NULL;
}

__attribute__((noinline)) static void stuck_on_the_mutex(void) {
  pthread_mutex_lock(&lock);
}

int main(void) {
  pthread_t holder;
  pthread_barrier_init(&held, NULL, 2);
  pthread_create(&holder, NULL, hold_the_mutex, NULL);
  pthread_barrier_wait(&held);
  for (int step = 0; step <= 3; ++step) {
    if (distrun_progress(step) != 0) {
      fprintf(stderr, "distrun_progress(%d) failed\n", step);
      return 1;
    }
    usleep(100000);
  }
  printf("deadlocking after step 3\n");
  fflush(stdout);
  stuck_on_the_mutex();
  return 0;
}
"""


def branches(stderr):
    """The merged picture's top-level branches: {"0-2": "text of that branch", ...}, from the lines between
    `stacks of N ranks` and `odd ranks`."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("stacks of "))
    found, current = {}, None
    for line in lines[start + 1:]:
        if line.startswith("odd ranks"):
            break
        m = re.match(r"^[|`]- \[\d+\] ranks ([\d,-]+)\s", line)
        if m:
            current = m.group(1)
            found[current] = line
        elif current is not None:
            found[current] += "\n" + line
    return found


def every_stack_file(stderr):
    m = re.search(r"^every stack: (\S+)$", stderr, re.M)
    if not m:
        raise AssertionError("no 'every stack:' line:\n" + stderr)
    return m.group(1)


class HangCase(LaunchCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(LIBRARY):
            raise unittest.SkipTest(f"no client library at {LIBRARY}")
        cls.python = python_command()

    def job_env(self, **extra):
        """The marker, the module, and TMPDIR in this test's directory (where stack files go by default)."""
        return self.env(**module_env(TMPDIR=self.dir, DISTRUN=DISTRUN, OUT=self.dir, **extra))

    def write(self, name, text):
        path = self.path(name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def assert_hung_and_stopped(self, r, rank, timeout):
        """Exit 125, a headline that says how long and which --hang-timeout, and a last line that says the
        job stopped because it hung, naming `rank` (a pattern) as the reason unless `rank` is None."""
        self.assertEqual(r.returncode, HANG_EXIT, r.stdout + r.stderr)
        m = re.search(r"^distrun: error: hung: no progress for ([\d.]+)s \(--hang-timeout %ds\); " % timeout,
                      r.stderr, re.M)
        self.assertIsNotNone(m, r.stderr)
        self.assertGreaterEqual(float(m.group(1)), timeout, r.stderr)
        last = r.stderr.rstrip("\n").splitlines()[-1]
        self.assertTrue(last.startswith("distrun: error: the job stopped: "), last)
        if rank is not None:
            self.assertRegex(last, rf"^distrun: error: the job stopped: rank ({rank}) on node 0 ")
        self.assertIn("hung: no progress for", last)
        return last


class TorchHang(HangCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if not torch_available():
            raise unittest.SkipTest(f"{PYTHON} has no torch")

    def run_hang(self, how, timeout, *extra):
        script = self.write("train.py", TORCH_HANG)
        r = run(["--nproc-per-node", "4", "--hang-timeout", str(timeout), *extra, "--", *self.python, script],
                env=self.job_env(HANG=how), timeout=120)
        ended = time.time()
        m = re.search(r"rank 3 stops at ([\d.]+) pid (\d+)", r.stdout)
        self.assertIsNotNone(m, r.stdout + r.stderr)
        stopped, pid = float(m.group(1)), int(m.group(2))
        # Every rank reported step 5 just before rank 3 printed that line: the job is hung `timeout` later,
        # collecting the stacks and stopping the workers take a few seconds at most.
        self.assertGreaterEqual(ended - stopped, timeout - 0.1, r.stderr)
        self.assertLess(ended - stopped, timeout + 5, r.stderr)
        return r, pid

    def test_a_rank_asleep_before_all_reduce_is_set_apart_and_the_job_stops(self):
        logs = self.path("logs")
        r, pid = self.run_hang("sleep", 3, "--log-dir", logs)
        last = self.assert_hung_and_stopped(r, 3, 3)
        self.assertIn("every rank reported step 5 last", r.stderr)
        self.assertIn("stacks of 4 ranks (4 with a stack)", r.stderr)
        tree = branches(r.stderr)
        self.assertEqual(sorted(tree), ["0-2", "3"], r.stderr)
        self.assertTrue(tree["0-2"].startswith("|- [3] ranks 0-2"), r.stderr)
        self.assertIn("all_reduce", tree["0-2"])
        self.assertNotIn("stuck_before_all_reduce", tree["0-2"])
        self.assertTrue(tree["3"].startswith("`- [1] ranks 3"), r.stderr)
        self.assertIn("stuck_before_all_reduce (", tree["3"])
        odd = r.stderr[r.stderr.index("odd ranks (the majority is [3] ranks 0-2):"):]
        self.assertRegex(odd, rf"rank 3 \(host [^,]+, pid {pid}(, gpu [^)]*)?\): stuck_before_all_reduce")
        self.assertIn("the stacks set apart rank 3 (", last)
        self.assertIn(f"pid {pid})", last)
        # The whole dump goes to --log-dir, with a section for every rank.
        path = every_stack_file(r.stderr)
        self.assertEqual(os.path.dirname(path), logs)
        self.assertRegex(os.path.basename(path), r"^stacks-[\d-]+\.txt$")
        with open(path) as f:
            dump = f.read()
        for rank in range(4):
            self.assertRegex(dump, rf"(?m)^== rank {rank} \(host .*, python\) ==$")
        rank3 = dump[dump.index("== rank 3 "):]
        self.assertIn("stuck_before_all_reduce", rank3[:rank3.find("\n\n")])
        self.no_process_left()

    def test_a_stopped_rank_is_named_as_stopped_and_killed_by_the_teardown(self):
        r, pid = self.run_hang("stop", 3)
        last = self.assert_hung_and_stopped(r, 3, 3)
        self.assertIn("stacks of 4 ranks (3 with a stack)", r.stderr)
        tree = branches(r.stderr)
        self.assertEqual(sorted(tree), ["0-2", "3"], r.stderr)
        self.assertIn("all_reduce", tree["0-2"])
        self.assertIn(f"<no stack: pid {pid} is stopped (state T)", tree["3"])
        self.assertIn("SIGSTOP", tree["3"])
        self.assertIn(f"pid {pid})", last)
        # The default TMPDIR holds the dump without --log-dir.
        self.assertEqual(os.path.dirname(every_stack_file(r.stderr)), self.dir)
        self.no_process_left()

    def test_stacks_and_status_from_inside_a_healthy_job_leave_it_unharmed(self):
        script = self.write("healthy.py", TORCH_HEALTHY)
        r = run(["--nproc-per-node", "4", "--hang-timeout", "4", "--", *self.python, script],
                env=self.job_env(), timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("hung", r.stderr)
        # 20 all_reduce sums of ones over 4 ranks: 4**20 everywhere.
        done = sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "done rank" in line)
        self.assertEqual(done, [f"done rank {i} sum {4 ** 20}" for i in range(4)], r.stdout + r.stderr)

        with open(self.path("stacks")) as f:
            stacks = f.read()
        self.assertTrue(stacks.startswith("rc 0\n"), stacks)
        self.assertIn("stacks of 4 ranks (4 with a stack)", stacks)
        self.assertIn("all_reduce", stacks)  # ranks 1-3 wait for rank 0 there
        with open(self.path("stacks-full.txt")) as f:
            dump = f.read()
        for rank in range(4):
            self.assertRegex(dump, rf"(?m)^== rank {rank} \(")
        with open(self.path("stacks-full")) as f:
            full = f.read()
        self.assertTrue(full.startswith("rc 0\n"), full)
        for rank in range(4):
            self.assertRegex(full, rf"(?m)^== rank {rank} \(")

        with open(self.path("status")) as f:
            status = f.read()
        self.assertTrue(status.startswith("rc 0\n"), status)
        self.assertIn("job running, epoch 0, 1 node(s)", status)
        # Quiet once the ranks waited longer than the quiet minimum for rank 0's stacks (slow builds): still healthy.
        self.assertRegex(status, r"(?m)^\s+node 0 \(.*\): 4 workers(, quiet for \S+)?$")
        self.assertRegex(status, r"(?m)^hang watch: .*4s")
        self.assertRegex(status, r"(?m)^\s+rank\s+step\s+steps/s\s+last report$")
        rows = re.findall(r"(?m)^\s+(\d+)\s+(-?\d+)\s+[\d.]+\s+\S+ ago \(pid \d+\)", status)
        self.assertEqual([(int(rank), int(step)) for rank, step in rows], [(rank, 10) for rank in range(4)], status)
        self.no_process_left()


class NativeHang(HangCase):
    def test_a_c_worker_deadlocked_on_a_mutex_shows_native_frames(self):
        for tool in ("cc", "gdb"):
            if not shutil.which(tool):
                self.skipTest(f"no {tool}")
        source = self.write("worker.c", C_DEADLOCK)
        exe = self.path("worker")
        flags = ["-fsanitize=address,undefined"] if cache_value("DISTRUN_SANITIZE") == "ON" else []
        subprocess.run(["cc", "-g", "-O0", "-pthread", *flags, "-I", os.path.join(ROOT, "runtime", "include"),
                        "-o", exe, source, LIBRARY, "-Wl,-rpath," + os.path.dirname(LIBRARY)],
                       check=True, capture_output=True, text=True)
        start = time.monotonic()
        r = run(["--nproc-per-node", "2", "--hang-timeout", "3", "--", exe],
                env=self.env(TMPDIR=self.dir, ASAN_OPTIONS="detect_leaks=0"), timeout=60)
        took = time.monotonic() - start
        last = self.assert_hung_and_stopped(r, None, 3)
        self.assertEqual(r.stdout.count("deadlocking after step 3"), 2, r.stdout)
        # Bounded by the hang timeout and the stack collection's 5 s deadline, not by gdb; the margin is wide,
        # for a loaded machine (13 s seen beside a parallel build): this catches a wait on gdb, not slowness.
        self.assertLess(took, 3 + 5 + 30, r.stderr)
        self.assertIn("every rank reported step 3 last", r.stderr)
        self.assertIn("stacks of 2 ranks (2 with a stack)", r.stderr)
        picture = r.stderr[r.stderr.index("stacks of 2 ranks"):r.stderr.index("every stack:")]
        self.assertRegex(picture, r"main \(\S*worker\.c:\d+\)")
        self.assertRegex(picture, r"futex_wait|pthread_mutex_lock|lll_lock_wait")
        with open(every_stack_file(r.stderr)) as f:
            dump = f.read()
        for rank in range(2):
            section = dump[dump.index(f"== rank {rank} "):]
            section = section[:section.find("\n\n")]
            self.assertIn("native) ==", section.splitlines()[0])
            self.assertRegex(section, r"#\d+ stuck_on_the_mutex \(\S*worker\.c:\d+\)")
            self.assertIn("pthread_mutex_lock", section)
            self.assertRegex(section, r"#\d+ hold_the_mutex \(\S*worker\.c:\d+\)")
        self.no_process_left()  # gdb too
        # Every rank is stuck alike, at the same step: neither progress nor stacks tell one apart, so the job as
        # a whole is to blame, not the first rank.
        self.assertNotRegex(last, r"^distrun: error: the job stopped: rank \d")


class ShellHang(HangCase):
    def test_a_shell_worker_that_stops_reporting_hangs_the_job(self):
        # The stacks are taken (ptrace) while ranks 0 and 2 go on running `distrun progress`; a sanitized build's
        # leak check at exit fails under ptrace ("LeakSanitizer does not work under ptrace", exit 9 seen in CI),
        # so the reporting helper runs without it; the launcher keeps its own.
        loop = (f'for i in $(seq 0 1000); do if [ "$RANK" = 1 ] && [ $i = 4 ]; then sleep 60; fi; '
                f'ASAN_OPTIONS={shlex.quote(asan_options_without_leak_check())} {DISTRUN} progress $i || exit 9; '
                f'sleep 0.1; done')
        start = time.monotonic()
        r = run(["--nproc-per-node", "3", "--hang-timeout", "2", "--", "bash", "-c", loop], env=self.job_env(),
                timeout=60)
        took = time.monotonic() - start
        # Which rank the last line blames depends on where the stacks caught the shells' short-lived children
        # (sleep, distrun progress): test_the_least_advanced_rank_is_blamed_... checks the blame.
        last = self.assert_hung_and_stopped(r, r"\d+", 2)
        # Rank 1 reported steps 0-3 in its first 0.4 s; the others went on.
        m = re.search(r"least advanced: rank 1 \(node 0 \([^)]*\), pid \d+\) at step 3 \(median (\d+)\)", r.stderr)
        self.assertIsNotNone(m, r.stderr)
        self.assertGreater(int(m.group(1)), 3)
        self.assertIn("least advanced: rank 1", last)
        # Stopped by the hang watch (2 s, then the stacks' 5 s deadline), not by the `sleep 60`: a wide margin for
        # a loaded or sanitized build (8.3 s seen under ASan against a 7.5 s bound).
        self.assertLess(took, 0.5 + 2 + 5 + 30, r.stderr)
        self.no_process_left()  # the `sleep 60` as well

    def test_the_least_advanced_rank_is_blamed_when_the_stacks_set_another_apart(self):
        # Rank 0 never reports (not watched) and sleeps; rank 1 reports steps 0-3 and then sleeps alike; rank 2
        # (Python) goes on reporting. The stacks set rank 2 apart (the only Python one, [2] ranks 0-1 in
        # sleep), but the progress says rank 1 hung: the job stopped because of rank 1.
        script = self.write("keeps_going.py", textwrap.dedent("""\
            import time
            import distrun
            def keeps_going():
                for step in range(1000):
                    distrun.progress(step)
                    time.sleep(0.1)
            keeps_going()
            """))
        python = " ".join(self.python)
        case = (f'case $RANK in 0) exec sleep 60;; '
                f'1) for i in 0 1 2 3; do {DISTRUN} progress $i || exit 9; done; exec sleep 60;; '
                f'2) exec {python} {script};; esac')
        r = run(["--nproc-per-node", "3", "--hang-timeout", "2", "--", "bash", "-c", case], env=self.job_env(),
                timeout=60)
        self.assertEqual(r.returncode, HANG_EXIT, r.stderr)
        self.assertRegex(r.stderr, r"least advanced: rank 1 \(node 0 \([^)]*\), pid \d+\) at step 3 \(median \d+\)")
        tree = branches(r.stderr)
        self.assertIn("keeps_going", tree.get("2", ""), r.stderr)
        self.assert_hung_and_stopped(r, 1, 2)
        self.no_process_left()


# A worker that reports a step every 50 ms through the module (no process per step: in a sanitized build a
# `distrun progress` takes ~0.1 s to start, now and then seconds); at STEP_MARK it writes its pid to MARK.
STEPPER = """\
import os, sys, time
import distrun
steps, mark_at = int(sys.argv[1]), int(os.environ.get("STEP_MARK", "-1"))
for step in range(steps):
    distrun.progress(step)
    if step == mark_at:
        with open(os.environ["MARK"] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.environ["MARK"] + ".tmp", os.environ["MARK"])
    time.sleep(0.05)
"""


class ProgressLag(HangCase):
    def stepper(self, steps):
        return [*self.python, self.write("stepper.py", STEPPER), str(steps)]

    def test_a_job_stepping_every_50ms_is_not_hung_under_the_smallest_timeout(self):
        # --hang-timeout 1 is accepted, so a job that reports 20 steps a second must run under it.
        r = run(["--hang-timeout", "1", "--", *self.stepper(41)], env=self.job_env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.no_process_left()

    def stopped_for_3s(self, stop_worker_too):
        """A healthy job under --hang-timeout 1 whose distrun is stopped for 3 s once its worker has stepped
        a while (and the worker with it: the whole machine stood still): time nobody looked is not time
        without progress, so the job runs to its end."""
        mark = self.path("mark")
        p = self.popen(["--hang-timeout", "1", "--", *self.stepper(100)],
                       env=self.job_env(STEP_MARK="20", MARK=mark))
        self.wait_for_files("mark", timeout=30)
        with open(mark) as f:
            worker = int(f.read())
        os.kill(p.pid, signal.SIGSTOP)  # this test's own distrun and worker, by their pids
        if stop_worker_too:
            os.kill(worker, signal.SIGSTOP)
        time.sleep(3)
        os.kill(p.pid, signal.SIGCONT)
        if stop_worker_too:
            # distrun looks at its board before the worker can write again: its ranks' last step is 3 s old.
            time.sleep(0.3)
            try:
                os.kill(worker, signal.SIGCONT)
            except ProcessLookupError:
                pass  # the job was stopped meanwhile: its exit status says why
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertNotIn("hung", err)
        self.no_process_left()

    def test_a_healthy_job_is_not_hung_after_its_distrun_was_stopped(self):
        self.stopped_for_3s(stop_worker_too=False)

    def test_a_healthy_job_is_not_hung_after_the_machine_stood_still(self):
        self.stopped_for_3s(stop_worker_too=True)


class Stragglers(HangCase):
    def test_status_flags_stragglers_and_a_rank_that_never_reports_is_not_watched(self):
        # Ranks 0 and 1 step every 50 ms; rank 2 as fast but 500 steps (25 s of progress) behind; rank 3 at a
        # quarter of the rate; rank 4 never reports and sleeps longer than --hang-timeout: not watched, the
        # job is not hung. Rank 0 asks for the status after 2.5 s.
        script = self.write("stragglers.py", textwrap.dedent("""\
            import os, subprocess, time
            import distrun
            rank = int(os.environ["RANK"])
            if rank == 4:
                time.sleep(3)
                raise SystemExit(0)
            period = 0.2 if rank == 3 else 0.05
            start, step = time.monotonic(), 0
            while time.monotonic() - start < 2.5:
                distrun.progress(step - 500 if rank == 2 else step)
                step += 1
                time.sleep(period)
            if rank == 0:
                r = subprocess.run([os.environ["DISTRUN"], "status"], capture_output=True, text=True, timeout=30)
                with open(os.path.join(os.environ["OUT"], "status"), "w") as f:
                    f.write("rc %d\\n%s\\n--- stderr\\n%s" % (r.returncode, r.stdout, r.stderr))
            time.sleep(0.5)
            """))
        r = run(["--nproc-per-node", "5", "--hang-timeout", "2", "--", *self.python, script], env=self.job_env(),
                timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertNotIn("hung", r.stderr)
        with open(self.path("status")) as f:
            status = f.read()
        self.assertTrue(status.startswith("rc 0\n"), status)
        self.assertIn("job running, epoch 0, 1 node(s)", status)
        self.assertRegex(status, r"(?m)^\s+node 0 \(.*\): 5 workers$")
        rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"(?m)^\s+(\d+)\s+-?\d+\s+[\d.]+\s+.*$", status)}
        self.assertEqual(sorted(rows), [0, 1, 2, 3], status)  # rank 4 reports nothing
        for rank in (0, 1):
            self.assertNotIn("behind:", rows[rank], status)
            self.assertNotIn("slow:", rows[rank], status)
        self.assertIn("behind:", rows[2], status)
        self.assertNotIn("slow:", rows[2], status)
        self.assertIn("slow:", rows[3], status)
        self.no_process_left()


class Restart(HangCase):
    def test_a_hang_in_epoch_zero_restarts_the_job(self):
        script = self.write("restart.py", textwrap.dedent("""\
            import os, time
            import distrun
            rank, restart = int(os.environ["RANK"]), int(os.environ["DISTRUN_RESTART_COUNT"])
            epoch = os.environ["DISTRUN_EPOCH"]
            steps = 100 if restart == 0 else 10
            for step in range(steps):
                distrun.progress(step)
                if restart == 0 and rank == 1 and step == 3:
                    def hang_in_epoch_zero():
                        time.sleep(3600)
                    hang_in_epoch_zero()
                time.sleep(0.05)
            print("finished rank %d restart %d epoch %s" % (rank, restart, epoch), flush=True)
            """))
        start = time.monotonic()
        r = run(["--nproc-per-node", "2", "--hang-timeout", "3", "--max-restarts", "1", "--", *self.python,
                 script], env=self.job_env(), timeout=60)
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        finished = sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "finished" in line)
        self.assertEqual(finished, ["finished rank 0 restart 1 epoch 1", "finished rank 1 restart 1 epoch 1"],
                         r.stdout + r.stderr)
        self.assertRegex(r.stderr, r"(?m)^distrun: error: hung: no progress for [\d.]+s \(--hang-timeout 3s\); "
                                   r"least advanced: rank 1 ")
        self.assertIn("hang_in_epoch_zero", r.stderr)
        self.assertRegex(r.stderr, r"restarting the job \(round 1\) after rank 1 on node 0 .*: hung: ")
        self.assertIn("restart 1 of 1", r.stderr)
        # Restarted by the hang watch, not after the hour-long sleep; the margin is wide, as above.
        self.assertLess(took, 0.5 + 3 + 5 + 3 + 30, r.stderr)
        self.no_process_left()


class WithoutReports(HangCase):
    def test_a_quiet_job_without_reports_is_never_hung_and_gets_one_stall_warning(self):
        # Each worker waits in open() on its FIFO (no CPU time, no output, no progress report) until the test
        # writes to it: over ten times --hang-timeout without a hang, then the stall warning, and on.
        for rank in range(2):
            os.mkfifo(self.path(f"go-{rank}"))
        lines, start = [], time.monotonic()
        p = self.popen(["--nproc-per-node", "2", "--hang-timeout", "1", "--stall-warning", "10", "--",
                        "sh", "-c", 'read x < "$0/go-$RANK"; exit 0', self.dir], env=self.job_env())

        def read():
            for line in p.stderr:
                lines.append((time.monotonic() - start, line))
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        wait_for(lambda: p.poll() is not None or any("stalled" in line for _, line in lines), timeout=25)
        text = "".join(line for _, line in lines)
        self.assertNotIn("hung", text)
        self.assertIsNone(p.poll(), "the job ended: " + text)
        stalled = [(t, line) for t, line in lines if "stalled" in line]
        self.assertTrue(stalled, "no stall warning after 25 s: " + text)
        when, warning = stalled[0]
        self.assertGreaterEqual(when, 10)
        self.assertTrue(warning.startswith("distrun: error: stalled: no worker on any node has used CPU time or "
                                           "written output for "), warning)
        # A warning only: the workers still run.
        self.assertEqual(len([pid for pid in processes_with(self.marker) if pid != p.pid]), 2)
        for rank in range(2):
            os.close(os.open(self.path(f"go-{rank}"), os.O_WRONLY | os.O_NONBLOCK))
        p.wait(timeout=20)
        reader.join(timeout=10)
        text = "".join(line for _, line in lines)
        self.assertEqual(p.returncode, 0, text)
        self.assertEqual([line for _, line in lines if "stalled" in line], [warning])
        self.assertNotIn("hung", text)
        self.assertEqual(sorted(os.listdir(self.dir)), ["go-0", "go-1"])  # no stack file
        self.no_process_left()


class UsageErrors(HangCase):
    def assert_usage_error(self, args, env=None, mention=None):
        r = run(args, env=env if env is not None else self.env(), timeout=30)
        self.assertEqual(r.returncode, 2, f"{args}: {r.stdout}{r.stderr}")
        self.assertEqual(r.stdout, "", args)
        self.assertEqual(len(r.stderr.splitlines()), 1, f"{args}: {r.stderr}")
        self.assertTrue(r.stderr.startswith("distrun: error: "), r.stderr)
        if mention:
            self.assertIn(mention, r.stderr)
        return r.stderr

    def test_usage_errors_exit_2_with_one_line(self):
        self.assert_usage_error(["progress", "3"], mention="DISTRUN_PROGRESS_FILE")
        self.assert_usage_error(["progress", "abc"], mention="'abc'")
        self.assert_usage_error(["progress"])
        self.assert_usage_error(["stacks"], mention="DISTRUN_COORDINATOR_ADDRESS")
        self.assert_usage_error(["status"], mention="DISTRUN_COORDINATOR_ADDRESS")
        self.assert_usage_error(["stacks", "--bogus"], mention="--bogus")
        self.assert_usage_error(["--hang-timeout", "0.5", "--", "true"], mention="--hang-timeout")
        self.assert_usage_error(["--hang-timeout", "banana", "--", "true"], mention="--hang-timeout")
        self.assert_usage_error(["--stall-warning", "banana", "--", "true"], mention="--stall-warning")

    def test_stacks_and_status_of_a_job_that_has_ended_fail_at_once(self):
        # Nothing listens on the address (a closed port): the commands report the refused connection with
        # exit 3, rather than waiting out their call deadline ("Deadline Exceeded") for a runtime that will
        # never come.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {"DISTRUN_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "DISTRUN_TOKEN": "x"}
        for verb in ("stacks", "status"):
            r = run([verb], env=env, timeout=30)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertEqual(len(r.stderr.splitlines()), 1, r.stderr)
            self.assertIn(f"distrun: {verb}: cannot reach the distrun runtime at 127.0.0.1:{port}", r.stderr)
            self.assertIn("Connection refused; is the job still running?", r.stderr)

    def test_a_bad_timeout_is_answered_with_the_forms_that_are_valid(self):
        # Whatever is wrong with the value, the line says what --hang-timeout takes (auto, off, at least a
        # second), not an example it refuses (0.5).
        for value in ("0.5", "banana", "-1"):
            line = self.assert_usage_error(["--hang-timeout", value, "--", "true"], mention="--hang-timeout")
            for word in ("auto", "off", "1 second"):
                self.assertIn(word, line)
            self.assertNotIn("(0.5", line)
        for value in ("0.5", "banana", "-1"):
            line = self.assert_usage_error(["--stall-warning", value, "--", "true"], mention="--stall-warning")
            for word in ("off", "1 second"):
                self.assertIn(word, line)
            self.assertNotIn("(0.5", line)

    def test_progress_with_a_bad_step_fails_the_worker_with_2(self):
        r = run(["--", DISTRUN, "progress", "abc"], env=self.job_env(), timeout=30)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("distrun progress: 'abc' is not a step number", r.stderr)

    def test_help_of_the_subcommands(self):
        for sub, words in (("stacks", ["faulthandler", "gdb", "SIGRTMIN+5", "--full", "--output"]),
                           ("progress", ["STEP"]), ("status", ["behind", "0.7"])):
            r = run([sub, "--help"], env=self.env(), timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            for word in words:
                self.assertIn(word, r.stdout, f"distrun {sub} --help")


if __name__ == "__main__":
    unittest.main(verbosity=2)
