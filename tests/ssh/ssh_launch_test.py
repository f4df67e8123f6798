"""distrun -H over real ssh: one command on the login host starts the whole job on the lab's hosts, which
are reachable only over ssh (tests/ssh/lab.sh). Each test's distrun on the hosts is a symlink under the
test's own directory (--remote-distrun), so every distrun of the test carries its marker in its command
line, and -x hands the marker to every worker: afterwards nothing of the test may be left on any host
(SshCase.tearDown counts them)."""
import os
import re
import signal
import time
import unittest

from ssh_harness import (BADKEY, CLOSED, HOSTS, LOGIN, NOKEY, NOWHERE, PYTHON, SILENT, DistrunSshCase,
                         count_on, cut, describe, kill_on, processes_on, restore, wait_for)

WORLD = 'echo "R $RANK/$WORLD_SIZE node $GROUP_RANK local $LOCAL_RANK host $(hostname) x=$FROM_X venv=$VIRTUAL_ENV"'
ALLREDUCE = (
    "import torch, torch.distributed as dist, socket\n"
    "dist.init_process_group('gloo')\n"
    "t = torch.tensor([dist.get_rank() + 1.0]); dist.all_reduce(t)\n"
    "print('SUM', int(t.item()), dist.get_rank(), socket.gethostname(), flush=True)\n"
    "dist.destroy_process_group()\n")


class SshLaunch(DistrunSshCase):
    def distrun(self, *args, hosts=None):
        return [self.remote, "--remote-distrun", self.remote, "-x", self.marker,
                "-H", hosts or ",".join(HOSTS), *args]

    def start_and_wait(self, args, files, env=None):
        p = self.login_popen(args, env=env)
        ok = wait_for(lambda: all(os.path.exists(self.path(f)) for f in files), timeout=30)
        if not ok:
            p.kill()
            out, err = p.communicate()
            self.fail(f"workers did not start: {[f for f in files if not os.path.exists(self.path(f))]}\n{err}")
        return p

    def test_one_command_starts_every_host_with_its_slots_and_the_job_works_across_them(self):
        args = self.distrun("-x", "FROM_X=a,b", "--log-dir", self.path("logs"), "--", "sh", "-c",
                            WORLD + '; "$DISTRUN_PROGRAM" kv set "k$RANK" "$(hostname)"; '
                            '"$DISTRUN_PROGRAM" barrier all; "$DISTRUN_PROGRAM" kv get k3; '
                            '[ "$RANK" != 3 ] || "$DISTRUN_PROGRAM" status',
                            hosts=f"{HOSTS[0]}:2,{HOSTS[1]}:1,{HOSTS[2]}")
        r = self.login(args, env=self.env(VIRTUAL_ENV="/opt/venv-like"), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = sorted(re.sub(r"^\[[^]]*\] ", "", l) for l in r.stdout.splitlines() if " R " in l)
        self.assertEqual(lines, [
            f"R 0/4 node 0 local 0 host {HOSTS[0]} x=a,b venv=/opt/venv-like",
            f"R 1/4 node 0 local 1 host {HOSTS[0]} x=a,b venv=/opt/venv-like",
            f"R 2/4 node 1 local 0 host {HOSTS[1]} x=a,b venv=/opt/venv-like",
            f"R 3/4 node 2 local 0 host {HOSTS[2]} x=a,b venv=/opt/venv-like"], r.stdout)
        tagged = [l for l in r.stdout.splitlines() if l.startswith(f"[{HOSTS[1]}:2] ")]
        self.assertEqual(len(tagged), 2, r.stdout)  # its world line, and k3's value
        self.assertEqual(r.stdout.count(f"] {HOSTS[2]}\n"), 4, r.stdout)  # every rank read k3 from host3
        self.assertIn(f"[{HOSTS[2]}:3]   node 0 ({HOSTS[0]}): 2 workers\n", r.stdout)  # distrun status
        with open(self.path("logs", "rank-2.out")) as f:  # written by host2's distrun
            self.assertIn(f"R 2/4 node 1 local 0 host {HOSTS[1]}", f.read())
        self.assert_nothing_left()

    def test_torch_gloo_all_reduce_across_the_hosts(self):
        with open(self.path("allreduce.py"), "w") as f:
            f.write(ALLREDUCE)
        r = self.login(self.distrun("--nproc-per-node", "1", "--", PYTHON, self.path("allreduce.py")),
                       timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        sums = sorted(l.split("SUM ", 1)[1] for l in r.stdout.splitlines() if "SUM " in l)
        self.assertEqual(sums, [f"6 {i} {h}" for i, h in enumerate(HOSTS)], r.stdout)

    def test_a_failing_worker_stops_every_host_with_its_code_naming_rank_and_host(self):
        script = '[ "$RANK" = 1 ] && { sleep 0.5; exit 9; }; touch %s/w$RANK; sleep 60' % self.dir
        r = self.login(self.distrun("--", "sh", "-c", script), timeout=60)
        self.assertEqual(r.returncode, 9, r.stderr)
        self.assertRegex(r.stderr, rf"rank 1 .*{HOSTS[1]}")
        self.assertIn(f"distrun[{HOSTS[1]}]", r.stderr)
        self.assert_nothing_left()

    def test_the_hang_watch_judges_the_whole_job(self):
        script = '"$DISTRUN_PROGRAM" progress 1; [ "$RANK" = 2 ] && exec sleep 60; "$DISTRUN_PROGRAM" progress 2; sleep 60'
        r = self.login(self.distrun("--hang-timeout", "1", "--", "sh", "-c", script), timeout=90)
        self.assertEqual(r.returncode, 125, r.stderr)
        self.assertRegex(r.stderr, r"hung: no progress")
        self.assert_nothing_left()

    def test_ctrl_c_stops_every_host_and_a_second_kills_at_once(self):
        script = 'trap "echo term $RANK; exit 3" TERM; touch %s/u$RANK; sleep 60 & wait' % self.dir
        p = self.start_and_wait(self.distrun("--", "sh", "-c", script), ["u0", "u1", "u2"])
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        # A set: dash now and then runs a TERM trap twice for one stop (seen with single-host distrun too).
        self.assertEqual({l.split()[-1] for l in out.splitlines() if "term" in l}, {"0", "1", "2"}, out)
        self.assert_nothing_left()
        stubborn = 'trap "" TERM; touch %s/s$RANK; while :; do sleep 1; done' % self.dir
        p = self.start_and_wait(self.distrun("--grace-period", "60", "--", "sh", "-c", stubborn),
                                ["s0", "s1", "s2"])
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = p.communicate(timeout=30)
        self.assertLess(time.monotonic() - start, 15, err)  # not the 60 s grace period
        self.assert_nothing_left()

    def test_the_launcher_killed_leaves_nothing_on_any_host(self):
        p = self.start_and_wait(self.distrun("--", "sh", "-c", "touch %s/k$RANK; sleep 60" % self.dir),
                                ["k0", "k1", "k2"])
        p.kill()  # its nsenter; the launcher is its child
        launcher = [pid for pid in processes_on(LOGIN, self.marker_value) if "-H" in describe(pid)]
        for pid in launcher:
            os.kill(pid, signal.SIGKILL)
        start = time.monotonic()
        self.assert_nothing_left(timeout=15)
        self.assertLess(time.monotonic() - start, 10)  # --heartbeat-timeout's default

    def test_the_launchers_link_cut_stops_every_hosts_workers_within_the_heartbeat_timeout(self):
        p = self.start_and_wait(self.distrun("--heartbeat-timeout", "2", "--", "sh", "-c",
                                             "touch %s/c$RANK; sleep 60" % self.dir), ["c0", "c1", "c2"])
        cut(LOGIN)
        start = time.monotonic()
        gone = wait_for(lambda: all(count_on(h, self.marker_value, ("environ",)) == 0 for h in HOSTS),
                        timeout=15)
        took = time.monotonic() - start
        restore(LOGIN)
        self.assertTrue(gone, {h: [describe(x) for x in processes_on(h, self.marker_value)] for h in HOSTS})
        self.assertLess(took, 8)  # 2 s without a word, then the workers' SIGTERM
        p.communicate(timeout=60)
        self.assert_nothing_left()

    def test_a_remote_distrun_killed_ends_the_job_or_an_elastic_job_goes_on(self):
        p = self.start_and_wait(self.distrun("--heartbeat-timeout", "2", "--", "sh", "-c",
                                             "touch %s/r$RANK; sleep 60" % self.dir), ["r0", "r1", "r2"])
        victims = [pid for pid in processes_on(HOSTS[2], self.remote, ("cmdline",))
                   if "--launcher-channel" in describe(pid) or "--node-rank" in describe(pid)]
        self.assertTrue(victims, processes_on(HOSTS[2], self.marker_value))
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        self.assertNotEqual(p.returncode, 0, err)
        self.assert_nothing_left()
        # Elastic: the lost host's job goes on with the others and ends well.
        script = ('touch %s/e$RANK.$DISTRUN_EPOCH; [ "$DISTRUN_EPOCH" = 0 ] && exec sleep 60; echo done $RANK'
                  % self.dir)
        p = self.start_and_wait(self.distrun("--nnodes", "2:3", "--max-restarts", "2", "--", "sh", "-c", script),
                                ["e0.0", "e1.0", "e2.0"])
        kill_on(HOSTS[2], "--launcher-channel")
        out, err = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(sorted(l.split()[-1] for l in out.splitlines() if "done" in l), ["0", "1"], out)
        self.assert_nothing_left()

    def test_every_failing_host_is_named_in_one_table_and_nothing_starts(self):
        hosts = ",".join([HOSTS[0], CLOSED, SILENT, NOKEY, BADKEY, NOWHERE])
        start = time.monotonic()
        r = self.login(self.distrun("--ssh-connect-timeout", "2", "--", "sleep", "60", hosts=hosts))
        took = time.monotonic() - start
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertLess(took, 2 + 1.5)  # the timeout + 1 s, and the test's own nsenter and Python
        self.assertIn("5 of 6 hosts failed the check before the launch; nothing was started", r.stderr)
        table = {l[2:].split()[0]: l for l in r.stderr.splitlines()[2:]}
        self.assertTrue(table[HOSTS[0]].startswith("  ") and table[HOSTS[0]].endswith(" ok"), r.stderr)
        for host, words in [(CLOSED, "connection refused"), (SILENT, "timed out"),
                            (NOKEY, "authentication failed"), (BADKEY, "host key"),
                            (NOWHERE, "does not resolve")]:
            self.assertTrue(table[host].startswith("! "), r.stderr)
            self.assertIn(words, table[host])
        self.assert_nothing_left(timeout=3)

    def test_a_missing_or_other_distrun_fails_the_check(self):
        r = self.login(self.distrun("--remote-distrun", self.path("nope"), "--", "true"))  # the last one wins
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(f"no distrun at {self.path('nope')} there", r.stderr)
        # An older distrun at the path (its hello says so)
        older = self.path("bin", "older")
        with open(older, "w") as f:
            f.write("#!/bin/sh\nread cwd\necho 'distrun-remote 1 0.0.1 somewhere 1234 %'\nread rest\n")
        os.chmod(older, 0o755)
        r = self.login([self.remote, "--remote-distrun", older, "-H", HOSTS[0], "--", "true"])
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("distrun 0.0.1 at", r.stderr)
        self.assertIn("install the same version on every host", r.stderr)

    def test_a_working_directory_only_this_machine_has_fails_the_check(self):
        # A directory on a file system only the login host mounts (a local scratch disk, say).
        private = self.path("private")
        os.makedirs(private)
        r = self.login(["sh", "-c", 'mount -t tmpfs tmpfs "$1" && mkdir "$1/run" && cd "$1/run" && shift && exec "$@"',
                        "sh", private] + self.distrun("--", "true"))
        self.login(["umount", private])
        self.assertEqual(r.returncode, 2, r.stderr)
        for h in HOSTS:
            self.assertRegex(r.stderr, rf"! {h} +the working directory {private}/run is not there")

    def test_dry_run_prints_each_hosts_ssh_command_and_plan(self):
        r = self.login(self.distrun("--dry-run", "--", "python3", "train.py"), env=self.env(DISTRUN_TOKEN="tok-x"))
        self.assertEqual(r.returncode, 0, r.stderr)
        for i, h in enumerate(HOSTS):
            self.assertIn(f"== {h}: node {i} of {len(HOSTS)} ==", r.stdout)
            self.assertIn(f"--node-rank={i}", r.stdout)
        self.assertRegex(r.stdout, rf"reached by +ssh -T -x -o BatchMode=yes .* -- {HOSTS[1]} 'exec ")
        self.assertIn("hosts             (known after rendezvous)", r.stdout)
        self.assertNotIn("tok-x", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
