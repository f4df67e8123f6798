"""distrun -H with hosts that are this machine (localhost, 127.0.0.1): the whole launch path of a job started
over ssh (the check before the launch, the start message on the channel, node 0 on the first host, the
output relayed, Ctrl-C, the launcher's end) without ssh, which a host that is this machine does not need.
tests/ssh/ runs the same over real ssh on a lab of hosts. Bad input is refused here."""
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402
from launch_helpers import LaunchCase, describe, processes_with, wait_for  # noqa: E402

HOSTS = "localhost:2,127.0.0.1:1"  # two nodes of this machine: node 0 with 2 workers, node 1 with 1
REPORT = 'echo "R $RANK/$WORLD_SIZE node $GROUP_RANK local $LOCAL_RANK"'


class HostsHere(LaunchCase):
    def test_every_host_runs_its_slots_and_node_0_serves_the_job(self):
        p = self.popen(["-H", HOSTS, "--", "sh", "-c", REPORT + "; distrun kv set k$RANK v; distrun barrier b"])
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        lines = sorted(line for line in out.splitlines() if " R " in line)
        self.assertEqual(len(lines), 3, out)
        self.assertTrue(any(line.endswith("R 2/3 node 1 local 0") for line in lines), out)
        self.assertTrue(all(line.startswith("[") and ":" in line.split("]")[0] for line in lines), out)

    def test_a_failing_worker_ends_the_job_with_its_code_naming_rank_and_host(self):
        p = self.popen(["-H", HOSTS, "--", "sh", "-c", '[ "$RANK" = 2 ] && exit 7; sleep 60'])
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 7, err)
        self.assertIn("rank 2", err)
        self.assertIn("distrun[127.0.0.1]", err)
        self.no_process_left()

    def test_ctrl_c_stops_every_host_and_a_second_kills_at_once(self):
        script = 'trap "echo term $RANK; exit 3" TERM; touch %s/up$RANK; sleep 60 & wait' % self.dir
        p = self.popen(["-H", HOSTS, "--", "sh", "-c", script])
        self.wait_for_files("up0", "up1", "up2")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        # A set: dash now and then runs a TERM trap twice for one stop (seen with single-host distrun too).
        self.assertEqual({line.split()[-1] for line in out.splitlines() if "term" in line}, {"0", "1", "2"}, out)
        self.no_process_left()
        stubborn = 'trap "" TERM; touch %s/s$RANK; while :; do sleep 1; done' % self.dir
        p = self.popen(["-H", HOSTS, "--grace-period", "60", "--", "sh", "-c", stubborn])
        self.wait_for_files("s0", "s1", "s2")
        p.send_signal(signal.SIGINT)
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        start = time.monotonic()
        _, err = p.communicate(timeout=30)
        self.assertLess(time.monotonic() - start, 20, err)  # not the 60 s grace period
        self.assertIn("killing the workers on every host", err)
        self.no_process_left()

    def test_a_killed_launcher_leaves_nothing_running(self):
        p = self.popen(["-H", HOSTS, "--", "sh", "-c", "touch %s/k$RANK; sleep 60" % self.dir])
        self.wait_for_files("k0", "k1", "k2")
        p.kill()
        p.communicate()
        self.assertTrue(wait_for(lambda: not processes_with(self.marker), timeout=15),
                        "\n".join(map(describe, processes_with(self.marker))))

    def test_the_token_and_variables_never_reach_a_command_line(self):
        token = "secret-" + self.marker_value
        p = self.popen(["-H", HOSTS, "--", "sh", "-c", "touch %s/t$RANK; sleep 60" % self.dir],
                       env=self.env(DISTRUN_TOKEN=token))
        self.wait_for_files("t0", "t1", "t2")
        shown = []
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if token.encode() in f.read():
                        shown.append(describe(int(name)))
            except OSError:
                pass
        p.send_signal(signal.SIGTERM)
        p.communicate(timeout=60)
        self.assertEqual(shown, [])
        self.no_process_left()

    def test_dry_run_prints_each_hosts_command_and_plan(self):
        p = self.popen(["--dry-run", "-H", HOSTS, "--", "python3", "train.py"],
                       env=self.env(DISTRUN_TOKEN="not-shown"))
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("== localhost: node 0 of 2, this machine (no ssh) ==", out)
        self.assertIn("== 127.0.0.1: node 1 of 2", out)
        self.assertIn("--node-rank=1", out)
        self.assertIn("DISTRUN_NODE_RANK=1", out)  # the host's own plan, as it made it
        self.assertNotIn("not-shown", out)

    def test_more_hosts_than_the_soft_descriptor_limit_allows(self):
        # Three pipes a host: 30 hosts need over 90 descriptors, past a soft limit of 64, which the launcher
        # raises (to the hard limit) for itself.
        hosts = ",".join(f"127.0.0.{i}" for i in range(2, 32))
        p = subprocess.Popen(["sh", "-c", 'ulimit -Sn 64 && exec "$@"', "sh", DISTRUN, "-H", hosts, "--",
                              "sh", "-c", 'echo "R $RANK"'], env={"PATH": "/usr/bin:/bin", **self.env()},
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.procs.append(p)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual(len([line for line in out.splitlines() if " R " in line]), 30, out)

    def test_bad_input_is_one_line_and_exit_code_2(self):
        with open(self.path("hosts"), "w") as f:
            f.write("a slots=2\nb slots=two\n")
        cases = [
            (["-H", "a:x", "--", "true"], "--hosts: 'a:x' has no valid slot count"),
            (["--hostfile", self.path("hosts"), "--", "true"], "hosts:2: 'slots=two' has no valid slot count"),
            (["--hostfile", self.path("none"), "--", "true"], "cannot read the hostfile"),
            (["-H", "localhost", "-x", "UNSET_HERE_X", "--", "true"], "-x UNSET_HERE_X: UNSET_HERE_X is not set"),
            (["-H", "localhost,127.0.0.1", "--nnodes", "3", "--", "true"], "--nnodes 3 but 2 hosts"),
            (["-H", "localhost", "--node-rank", "1", "--", "true"], "come from the host list"),
            (["-H", "localhost"], "no command to run on the hosts"),
            (["-H", "localhost", "--ssh-connect-timeout", "0", "--", "true"], "--ssh-connect-timeout='0'"),
        ]
        for args, expected in cases:
            p = self.popen(args)
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 2, f"{args}: {err}")
            self.assertIn(expected, err, args)
            self.assertEqual(len(err.strip().splitlines()), 1, err)


if __name__ == "__main__":
    unittest.main()
