"""Supervision with real processes: failures and their summary, signals, distrun killed with SIGKILL,
restarts, --timeout, and teardown of what workers leave behind. After every test no process started by
the job may remain (each test's processes carry a unique marker variable, checked in /proc/*/environ)."""
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402
from launch_helpers import PYTHON, LaunchCase, processes_with, wait_for  # noqa: E402

# A worker that announces itself with DIR/ready-<rank>, records the signals it gets as DIR/<sig>-<rank>
# (exiting with code 0 on TERM/INT), and exits 0 once DIR/release exists.
SIGNAL_WORKER = r"""
import os, signal, sys, time
d, rank = sys.argv[1], os.environ["RANK"]
def touch(name):
    open(os.path.join(d, "%s-%s" % (name, rank)), "w").close()
def on(sig, frame):
    touch(signal.Signals(sig).name)
    if sig in (signal.SIGTERM, signal.SIGINT):
        sys.exit(0)
for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, on)
touch("ready")
while not os.path.exists(os.path.join(d, "release")):
    time.sleep(0.02)
"""


class Failures(LaunchCase):
    def test_failing_rank_sets_the_exit_code_and_is_summarised(self):
        script = ('if [ "$RANK" = 1 ]; then echo "first line" >&2; echo "boom from rank one" >&2; exit 3; fi; '
                  'exec sleep 60')
        start = time.monotonic()
        r = run(["--nproc-per-node", "3", "--", "sh", "-c", script], env=self.env())
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertLess(time.monotonic() - start, 20, "the other workers are stopped at once, not waited for")
        summary = r.stderr[r.stderr.index("failed first"):]
        self.assertIn("rank 1 failed first", r.stderr)
        self.assertIn("exit code 3", summary)
        self.assertIn("pid ", summary)
        self.assertIn("host ", summary)
        self.assertIn("boom from rank one", summary)
        self.assertIn("first line", summary)
        self.no_process_left()

    def test_worker_killed_by_sigsegv_exits_139(self):
        crash = "import os, signal, sys; sys.stderr.write('about to crash\\n'); os.kill(os.getpid(), signal.SIGSEGV)"
        r = run(["--", PYTHON, "-c", crash], env=self.env())
        self.assertEqual(r.returncode, 139, r.stderr)
        self.assertIn("signal SIGSEGV", r.stderr)
        self.assertIn("about to crash", r.stderr)

    def test_all_workers_succeed_without_waiting_for_each_other_longer_than_needed(self):
        start = time.monotonic()
        r = run(["--nproc-per-node", "4", "--", "sh", "-c", "sleep 0.$RANK"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.stderr, "")

    def test_grace_period_then_sigkill_for_workers_that_ignore_term(self):
        # Rank 0 fails once rank 1 ignores TERM.
        script = (f"trap '' TERM; if [ \"$RANK\" = 0 ]; then while [ ! -e {self.dir}/ignoring ]; do sleep 0.02; "
                  f"done; exit 5; fi; touch {self.dir}/ignoring; while :; do sleep 0.05; done")
        start = time.monotonic()
        r = run(["--nproc-per-node", "2", "--grace-period", "0.5", "--", "sh", "-c", script], env=self.env())
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 5, r.stderr)
        self.assertGreaterEqual(took, 0.5)
        self.assertLess(took, 10)
        self.assertIn("SIGKILL", r.stderr)
        self.no_process_left()

    def test_leftover_background_processes_are_killed_when_workers_succeed(self):
        script = ("sleep 60 & setsid sleep 61 </dev/null >/dev/null 2>&1 & "
                  f"{PYTHON} -c 'import os, time; os.setsid(); os.fork() or time.sleep(62); time.sleep(62)' "
                  "</dev/null >/dev/null 2>&1 & exit 0")
        start = time.monotonic()
        r = run(["--nproc-per-node", "2", "--", "sh", "-c", script], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.no_process_left()

    def test_orphans_that_appear_during_the_grace_period_get_term_too(self):
        # A helper ignores TERM, outlives its worker by half a second and leaves a process of its own that
        # only then becomes distrun's: it must get SIGTERM then, not SIGKILL at the end of the grace period.
        helper = self.path("helper.py")
        with open(helper, "w") as f:
            f.write("import os, signal, subprocess, sys, time\n"
                    "d = sys.argv[1]\n"
                    "subprocess.Popen([sys.executable, '-c', 'import os, sys, time; os.setsid(); "
                    "open(sys.argv[1] + \"/left\", \"w\").close(); time.sleep(60)', d])\n"
                    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                    "while not os.path.exists(d + '/left'):\n"
                    "    time.sleep(0.01)\n"
                    "open(d + '/ready', 'w').close()\n"
                    "time.sleep(0.5)\n")
        script = f"{PYTHON} {helper} {self.dir} & while [ ! -e {self.dir}/ready ]; do sleep 0.02; done; exit 0"
        start = time.monotonic()
        r = run(["--grace-period", "20", "--", "sh", "-c", script], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertNotIn("SIGKILL", r.stderr)
        self.no_process_left()


class Signals(LaunchCase):
    def start_signal_job(self, *options, workers=2):
        p = self.popen(["--nproc-per-node", str(workers), *options, "--", PYTHON, "-c", SIGNAL_WORKER, self.dir])
        self.wait_for_files(*[f"ready-{r}" for r in range(workers)])
        return p

    def test_usr1_is_forwarded_without_teardown(self):
        p = self.start_signal_job()
        p.send_signal(signal.SIGUSR1)
        self.wait_for_files("SIGUSR1-0", "SIGUSR1-1")
        time.sleep(0.2)
        self.assertIsNone(p.poll(), "USR1 must not stop the job")
        p.send_signal(signal.SIGUSR2)
        self.wait_for_files("SIGUSR2-0", "SIGUSR2-1")
        open(self.path("release"), "w").close()
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("forwarded SIGUSR1", err)
        self.assertFalse(os.path.exists(self.path("SIGTERM-0")))

    def test_term_stops_workers_that_clean_up(self):
        p = self.start_signal_job(workers=3)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        for r in range(3):
            self.assertTrue(os.path.exists(self.path(f"SIGTERM-{r}")), f"rank {r} did not get SIGTERM: {err}")
        self.assertIn("received SIGTERM", err)
        self.no_process_left()

    def test_int_is_forwarded_as_int_and_gives_130(self):
        p = self.start_signal_job()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 130, err)
        self.assertTrue(os.path.exists(self.path("SIGINT-0")))
        self.assertTrue(os.path.exists(self.path("SIGINT-1")))

    def test_hup_stops_the_job_with_129(self):
        p = self.popen(["--", "sh", "-c", f"touch {self.dir}/ready-0; exec sleep 60"])
        self.wait_for_files("ready-0")
        p.send_signal(signal.SIGHUP)
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, 129)

    def test_forward_signals_option_chooses_the_forward_only_set(self):
        # TERM forwarded only: the workers (which exit 0 on TERM) end and the job succeeds.
        p = self.start_signal_job("--forward-signals", "TERM,USR1")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("forwarded SIGTERM", err)

    def test_usr2_not_in_the_list_is_ignored(self):
        p = self.start_signal_job("--forward-signals", "USR1")
        p.send_signal(signal.SIGUSR2)
        time.sleep(0.3)
        self.assertIsNone(p.poll())
        self.assertFalse(os.path.exists(self.path("SIGUSR2-0")))
        open(self.path("release"), "w").close()
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("ignoring SIGUSR2", err)

    def test_second_signal_kills_at_once(self):
        p = self.popen(["--grace-period", "60", "--", "sh", "-c",
                        f"trap '' INT TERM; touch {self.dir}/ready-0; while :; do sleep 0.05; done"])
        self.wait_for_files("ready-0")
        p.send_signal(signal.SIGINT)
        time.sleep(0.3)
        self.assertIsNone(p.poll(), "the worker ignores INT: distrun waits for the grace period")
        start = time.monotonic()
        p.send_signal(signal.SIGINT)
        p.communicate(timeout=20)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(p.returncode, 130)
        self.no_process_left()

    def start_stop_by_failure(self):
        """Rank 1 fails once rank 0 is ready; rank 0 cleans up for 1.5 s on TERM. Returns once the cleanup
        began, so distrun is stopping for a reason other than a signal."""
        script = (f'if [ "$RANK" = 1 ]; then while [ ! -e {self.dir}/ready-0 ]; do sleep 0.02; done; exit 3; fi; '
                  f"trap 'touch {self.dir}/term-begun; sleep 1.5; touch {self.dir}/term-done; exit 0' TERM; "
                  f"touch {self.dir}/ready-0; while :; do sleep 0.05; done")
        p = self.popen(["--nproc-per-node", "2", "--grace-period", "60", "--", "sh", "-c", script])
        self.wait_for_files("term-begun")
        return p

    def test_a_signal_while_stopping_for_a_failure_keeps_the_grace_period(self):
        # A scheduler's cancel often arrives just after distrun began to stop for another reason (a node of
        # the job was lost first): it asks for the same stop, and the workers' cleanup must still finish.
        p = self.start_stop_by_failure()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertTrue(os.path.exists(self.path("term-done")), err)
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("the workers keep their grace period", err)
        self.no_process_left()

    def test_two_signals_while_stopping_for_a_failure_kill_at_once(self):
        p = self.start_stop_by_failure()
        p.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertFalse(os.path.exists(self.path("term-done")), err)
        self.assertEqual(p.returncode, 3, err)
        self.assertIn("killing the workers now", err)
        self.no_process_left()


class KilledDistrun(LaunchCase):
    def test_sigkill_of_distrun_leaves_nothing(self):
        # Each worker starts a child in its own process group and a grandchild that leaves the session.
        worker = (
            "import os, subprocess, sys, time\n"
            "d, rank = sys.argv[1], os.environ['RANK']\n"
            "subprocess.Popen(['sleep', '300'])\n"
            "subprocess.Popen([sys.executable, '-c', 'import os, time; os.setsid(); time.sleep(300)'])\n"
            "open(os.path.join(d, 'ready-' + rank), 'w').close()\n"
            "time.sleep(300)\n")
        p = self.popen(["--nproc-per-node", "2", "--", PYTHON, "-c", worker, self.dir])
        self.wait_for_files("ready-0", "ready-1")
        self.assertTrue(wait_for(lambda: len(processes_with(self.marker)) >= 7),
                        "distrun, its sentinel, 2 workers, 4 children")
        p.kill()
        p.communicate()
        self.no_process_left()


class Restarts(LaunchCase):
    def test_failure_then_success_on_restart(self):
        # Rank 1 fails only once rank 0 has written its line: the failure stops rank 0 at once, and on a slow
        # machine (ASan) that came before rank 0's shell had written anything.
        script = (f'echo "$RANK $DISTRUN_RESTART_COUNT $TORCHELASTIC_RESTART_COUNT" >> {self.dir}/attempts; '
                  'if [ "$DISTRUN_RESTART_COUNT" = 0 ] && [ "$RANK" = 1 ]; then '
                  f'while ! grep -q "^0 0 0" {self.dir}/attempts; do sleep 0.02; done; exit 7; fi; '
                  'if [ "$DISTRUN_RESTART_COUNT" = 0 ]; then exec sleep 60; fi')
        r = run(["--nproc-per-node", "2", "--max-restarts", "2", "--", "sh", "-c", script], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("attempts")) as f:
            attempts = sorted(f.read().splitlines())
        self.assertEqual(attempts, ["0 0 0", "0 1 1", "1 0 0", "1 1 1"])
        self.assertIn("restarting all workers (restart 1 of 2", r.stderr)
        self.no_process_left()

    def test_restarts_keep_the_ports(self):
        dump = f'echo "$MASTER_PORT $DISTRUN_COORDINATOR_ADDRESS" >> {self.dir}/ports; [ "$DISTRUN_RESTART_COUNT" = 2 ]'
        r = run(["--max-restarts", "2", "--", "sh", "-c", dump], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("ports")) as f:
            self.assertEqual(len(set(f.read().splitlines())), 1)

    def test_exhausted_restarts_exit_with_the_root_cause(self):
        r = run(["--max-restarts", "1", "--", "sh", "-c", f"echo x >> {self.dir}/attempts; exit 4"], env=self.env())
        self.assertEqual(r.returncode, 4, r.stderr)
        with open(self.path("attempts")) as f:
            self.assertEqual(f.read(), "x\nx\n")
        self.assertIn("no restarts left", r.stderr)

    def test_no_restart_after_a_signal(self):
        p = self.popen(["--max-restarts", "3", "--", "sh", "-c",
                        f"echo x >> {self.dir}/attempts; touch {self.dir}/ready-0; exec sleep 60"])
        self.wait_for_files("ready-0")
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=20)
        self.assertEqual(p.returncode, 143)
        with open(self.path("attempts")) as f:
            self.assertEqual(f.read(), "x\n")


class Timeout(LaunchCase):
    def test_timeout_stops_the_job_with_124(self):
        start = time.monotonic()
        r = run(["--timeout", "1", "--grace-period", "1", "--nproc-per-node", "2", "--", "sleep", "60"],
                env=self.env())
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertLess(time.monotonic() - start, 10)
        self.assertIn("--timeout", r.stderr)
        self.no_process_left()

    def test_timeout_from_the_environment_with_a_unit(self):
        r = run(["--", "sleep", "60"], env=self.env(DISTRUN_TIMEOUT="0.5s"))
        self.assertEqual(r.returncode, 124, r.stderr)

    def test_bad_durations_are_usage_errors(self):
        for bad in ["-1", "abc", "1x", ""]:
            r = run(["--timeout", bad, "--", "true"], env=self.env())
            self.assertEqual(r.returncode, 2, bad)
            self.assertIn("--timeout", r.stderr)
        r = run(["--", "true"], env=self.env(DISTRUN_GRACE_PERIOD="soon"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("DISTRUN_GRACE_PERIOD='soon'", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
