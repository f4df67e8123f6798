"""The runtime's worker services through the CLI verbs, with real workers under a real distrun: `distrun kv …`
and `distrun barrier …` reach node 0's service with the address and token distrun gives every worker."""
import os
import re
import shutil
import subprocess
import unittest

from distrun_harness import DISTRUN, run
from launch_helpers import LaunchCase


class KvCli(LaunchCase):
    def launch(self, nproc, script, *extra, timeout=60):
        """Runs `sh -c script` in `nproc` workers; $D is distrun, $R the worker's rank."""
        r = run(["--nproc-per-node", str(nproc), "--tag-output", "off", *extra, "--",
                 "sh", "-c", 'R=$DISTRUN_PROCESS_ID; ' + script],
                env=self.env(D=DISTRUN, OUT=self.dir), timeout=timeout)
        return r

    def test_set_barrier_get_across_workers(self):
        r = self.launch(3, '$D kv set "key/$R" "value $R" && $D barrier all-set && '
                           'echo "$R sees $($D kv get key/$(( (R + 1) % 3 )))"')
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = sorted(r.stdout.splitlines())
        self.assertEqual(lines, ["0 sees value 1", "1 sees value 2", "2 sees value 0"])

    def test_workers_reach_a_distrun_that_is_not_on_path(self):
        # /opt/x/bin/distrun -- train.sh, or a venv's distrun without activating it: the workers' scripts
        # still have `distrun` (its directory is appended to their PATH) and DISTRUN_PROGRAM.
        bin_dir = os.path.join(self.dir, "opt", "bin")
        os.makedirs(bin_dir)
        for name in ("distrun", "distrun-sentinel", "distrun-runtime.so"):
            shutil.copy2(os.path.join(os.path.dirname(DISTRUN), name), bin_dir)
        program = os.path.join(bin_dir, "distrun")
        r = subprocess.run([program, "--nproc-per-node", "2", "--tag-output", "off", "--", "sh", "-c",
                            'distrun kv set "k/$DISTRUN_PROCESS_ID" "$DISTRUN_PROCESS_ID" && distrun barrier b && '
                            'echo "$DISTRUN_PROCESS_ID $(distrun kv get k/0) $(command -v distrun) $DISTRUN_PROGRAM"'],
                           env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **self.env()}, capture_output=True,
                           text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), [f"0 0 {program} {program}", f"1 0 {program} {program}"])

    def test_a_distrun_without_its_runtime_module_detects_but_says_what_is_missing_for_the_rest(self):
        # --detect never loads the module; a launch and a verb need it and name it, exit 1, nothing started.
        bin_dir = os.path.join(self.dir, "lonely", "bin")
        os.makedirs(bin_dir)
        for name in ("distrun", "distrun-sentinel"):
            shutil.copy2(os.path.join(os.path.dirname(DISTRUN), name), bin_dir)
        program = os.path.join(bin_dir, "distrun")
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **self.env()}
        r = subprocess.run([program, "--detect", "--format", "json"], env=env, capture_output=True, text=True,
                           timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('"method": "local"', r.stdout)
        marker = os.path.join(self.dir, "ran")
        for argv in (["kv", "get", "k"], ["--nproc-per-node", "2", "--", "touch", marker]):
            with self.subTest(argv=argv):
                r = subprocess.run([program, *argv], env=env, capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertEqual(r.stderr, f"distrun: error: the runtime module distrun-runtime.so is neither beside "
                                           f"{program} nor in ../libexec/distrun: distrun needs it to launch a job "
                                           f"or to speak to one; reinstall distrun (both come together)\n")
                self.assertFalse(os.path.exists(marker))

    def test_only_a_verb_or_a_launch_that_needs_the_runtime_loads_the_runtime_module(self):
        # The dynamic loader's own account (LD_DEBUG=files) of what each command mapped. A single-host job
        # starts its runtime when something needs it (launcher/job/lazy_link.h): a worker that dials it, the
        # first progress report (a quarter second in), a failure; workers that all exit 0 sooner never do.
        env = {"LD_DEBUG": "files", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin", **self.env()}
        launch = ["--nproc-per-node", "2", "--"]
        for argv, loads, code in ((["--detect"], False, 0), (["--detect", "--format", "json"], False, 0),
                                  (["--dry-run", "--", "true"], False, 0), (["--version"], False, 0),
                                  (["--help"], False, 0), (["kv", "get", "k"], True, 2),
                                  (launch + ["true"], False, 0), (launch + ["sleep", "0.6"], True, 0),
                                  (launch + ["sh", "-c", "exit 3"], True, 3),
                                  (launch + ["sh", "-c", f"{DISTRUN} kv set k v"], True, 0)):
            with self.subTest(argv=argv):
                p = subprocess.Popen([DISTRUN, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, stdin=subprocess.DEVNULL)
                _, err = p.communicate(timeout=60)
                self.assertEqual(p.returncode, code, err[-2000:])
                # Only this distrun's lines (the loader prefixes its pid): a worker's `distrun kv` maps its own.
                mine = re.compile(rf"^\s*{p.pid}:\s+calling init: .*/distrun-runtime\.so$", re.M)
                self.assertEqual(bool(mine.search(err)), loads, err[-2000:])

    def test_get_waits_until_the_key_is_set(self):
        r = self.launch(2, 'if [ $R = 0 ]; then echo "got $($D kv get late --timeout 30)"; '
                           'else sleep 0.5; $D kv set late here; fi')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("got here", r.stdout)

    def test_concurrent_adds_from_eight_workers_sum_correctly(self):
        r = self.launch(8, 'i=0; while [ $i -lt 10 ]; do $D kv add counter 1 >/dev/null || exit 9; i=$((i+1)); done; '
                           '$D barrier counted && if [ $R = 0 ]; then echo "total $($D kv get counter)"; fi',
                        timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("total 80", r.stdout)

    def test_add_prints_the_new_value_and_accepts_negative_deltas(self):
        r = self.launch(1, '$D kv add n 5; $D kv add n -7; $D kv add n -- -1')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), ["5", "-2", "-3"])

    def test_barrier_timeout_exits_124(self):
        r = self.launch(2, 'if [ $R = 0 ]; then $D barrier never --timeout 0.3; echo "rc=$?"; '
                           'else sleep 1; fi')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rc=124", r.stdout)
        self.assertIn("barrier", r.stderr)

    def test_negative_answers_exit_1(self):
        r = self.launch(1, '$D kv try-get absent; echo "try-get=$?"; '
                           '$D kv del absent; echo "del=$?"; '
                           '$D kv set k old; $D kv cas k wrong new; echo "cas-mismatch=$?"; '
                           '$D kv cas k old new; echo "cas=$?"; echo "now $($D kv try-get k)"; '
                           '$D kv cas fresh "" first; echo "cas-absent=$?"; '
                           '$D kv del k; echo "del-present=$?"')
        self.assertEqual(r.returncode, 0, r.stderr)
        for expected in ["try-get=1", "del=1", "cas-mismatch=1", "cas=0", "now new", "cas-absent=0",
                         "del-present=0"]:
            self.assertIn(expected, r.stdout.splitlines())
        self.assertIn("holds 'old'", r.stderr)

    def test_ls_lists_keys_by_prefix(self):
        r = self.launch(1, '$D kv set a/1 x; $D kv set a/2 y; $D kv set b/1 z; $D kv ls a/; echo --; $D kv ls')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split("--\n"), ["a/1\na/2\n", "a/1\na/2\nb/1\n"])

    def test_wait_for_several_keys(self):
        r = self.launch(2, 'if [ $R = 0 ]; then $D kv wait x y --timeout 30 && echo waited; '
                           'else $D kv set x 1; sleep 0.3; $D kv set y 2; fi')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("waited", r.stdout)

    def test_wrong_token_is_refused_with_exit_3(self):
        r = self.launch(1, 'DISTRUN_TOKEN=guessed-s3cret $D kv get x --timeout 5; echo "rc=$?"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("rc=3", r.stdout)
        self.assertIn("refused the job token", r.stderr)
        self.assertIn("wrong job token", r.stderr)  # the service logs the refusal...
        self.assertNotIn("guessed-s3cret", r.stderr)  # ...never the token

    def test_workers_get_a_token_that_detect_never_prints(self):
        r = self.launch(1, 'echo "token-length ${#DISTRUN_TOKEN}"')
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("token-length 32", r.stdout)
        d = run(["--detect", "--format", "env"], env=self.env())
        self.assertNotIn("DISTRUN_TOKEN", d.stdout)


class KvCliErrors(unittest.TestCase):
    def test_usage_errors_exit_2(self):
        env = {"DISTRUN_COORDINATOR_ADDRESS": "127.0.0.1:1", "DISTRUN_PROCESS_ID": "0"}
        for args, needle in [
            (["kv"], "needs an operation"),
            (["kv", "get"], "takes KEY"),
            (["kv", "set", "k"], "takes KEY VALUE"),
            (["kv", "frob", "k"], "not a kv operation"),
            (["kv", "add", "k", "x"], "not an integer"),
            (["kv", "get", "k", "--timeout", "soon"], "--timeout"),
            (["kv", "get", "k", "--verbose"], "unknown option"),
            (["barrier"], "takes NAME"),
        ]:
            r = run(args, env=env)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(needle, r.stderr, args)
            self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)

    def test_outside_a_job_says_how_to_run_it(self):
        r = run(["kv", "get", "k"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("DISTRUN_COORDINATOR_ADDRESS is not set", r.stderr)
        r = run(["barrier", "b"], env={"DISTRUN_COORDINATOR_ADDRESS": "127.0.0.1:1"})
        self.assertEqual(r.returncode, 2)
        self.assertIn("DISTRUN_PROCESS_ID is not set", r.stderr)

    def test_unreachable_service_exits_3(self):
        r = run(["kv", "try-get", "k", "--timeout", "0.5"], env={"DISTRUN_COORDINATOR_ADDRESS": "127.0.0.1:1"})
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("cannot reach the distrun runtime at 127.0.0.1:1", r.stderr)

    def test_outside_a_job_a_runtime_that_has_ended_fails_at_once_as_status_does(self):
        # No --timeout: a user's command against an ended job must not wait for it (as status and stacks).
        env = {"DISTRUN_COORDINATOR_ADDRESS": "127.0.0.1:1", "DISTRUN_TOKEN": "t"}
        for verb in (["kv", "get", "k"], ["kv", "set", "k", "v"], ["status"]):
            r = run(verb, env=env, timeout=10)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertRegex(r.stderr, r"^distrun: (kv get|kv set|status): cannot reach the distrun runtime at "
                                       r"127\.0\.0\.1:1: .*Connection refused; is the job still running\?\n$")
        # A worker (DISTRUN_PROCESS_ID) waits for a coordinator that may still be starting, up to its timeout.
        r = run(["kv", "get", "k", "--timeout", "0.2"], env=dict(env, DISTRUN_PROCESS_ID="0"), timeout=30)
        self.assertEqual(r.returncode, 124, r.stderr)
        self.assertNotIn("Connection refused", r.stderr)

    def test_help(self):
        r = run(["kv", "--help"])
        self.assertEqual(r.returncode, 0)
        self.assertIn("Exit codes", r.stdout)


if __name__ == "__main__":
    unittest.main()
