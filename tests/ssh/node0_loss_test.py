"""Node 0's host lost in an elastic job started with distrun -H: node 0 (the first host) hosts the job's
coordinator, node 1 (host2) is its standby. Once every worker runs, host1 is lost (everything of the job
there killed at once, or the host cut off the network); the standby takes the job over, the next epoch runs
on host2 and host3, and the launcher on sshlogin says what happened and exits with the job's code. As in
ssh_launch_test.py, each test's distrun on the hosts is a symlink under its own directory (--remote-distrun)
and -x hands the marker to every worker: afterwards nothing of the test may be left on any host."""
import os
import unittest

from ssh_harness import (HOSTS, DistrunSshCase, count_on, cut, describe, kill_on, processes_on, restore,
                         wait_for)

# Epoch 0's workers wait to be stopped; the next epoch's say where they ran and exit with $1.
SCRIPT = ('touch "$0/w$RANK.$DISTRUN_EPOCH"; [ "$DISTRUN_EPOCH" = 0 ] && exec sleep 60; '
          'echo "done $RANK/$WORLD_SIZE epoch $DISTRUN_EPOCH on $(hostname)"; exit "$1"')
STANDBY_TOOK_OVER = (f"node lost: it hosted the job's coordinator; its standby, node 1 ({HOSTS[1]}), took over "
                     "with 2 node(s)")
# What the launcher says of node 0's host: its ssh lost (killed, or cut off until ssh gave up), or node 0's
# distrun left the job (exit code 75: fenced, or cut off from the launcher) and ssh delivered its end later.
LOST_BY_SSH = (f"distrun: error: the ssh connection to {HOSTS[0]} (node 0, which hosts the job's coordinator) "
               "ended (code 255): the host or the link to it is lost; its standby takes the job over")
LEFT_FENCED = (f"distrun: error: node 0 on {HOSTS[0]}, which hosted the job's coordinator, left the job (exit code "
               "75: fenced, or cut off from the launcher); its standby takes the job over")


class Node0Loss(DistrunSshCase):
    def start(self, code):
        """The elastic job on host1..host3, one worker each; returns once every epoch-0 worker runs."""
        args = [self.remote, "--remote-distrun", self.remote, "-x", self.marker, "-H", ",".join(HOSTS),
                "--nnodes", f"2:{len(HOSTS)}", "--max-restarts", "1", "--heartbeat-timeout", "2",
                "--", "sh", "-c", SCRIPT, self.dir, str(code)]
        p = self.login_popen(args)
        files = [f"w{r}.0" for r in range(len(HOSTS))]
        if not wait_for(lambda: all(os.path.exists(self.path(f)) for f in files), timeout=30):
            p.kill()
            _, err = p.communicate()
            self.fail(f"epoch 0's workers did not start: {[f for f in files if not os.path.exists(self.path(f))]}"
                      f"\n{err}")
        return p

    def kill_host_0(self):
        """Everything of the job on host1 killed at once, as the host's own death would: node 0's distrun,
        its sentinel and its workers. Again until none is left (one may have been starting a child)."""
        self.assertTrue(processes_on(HOSTS[0], self.marker_value))
        self.assertTrue(wait_for(lambda: not kill_on(HOSTS[0], self.marker_value), timeout=5),
                        [describe(p) for p in processes_on(HOSTS[0], self.marker_value)])

    def assert_went_on_without_host_0(self, out, err):
        # Epoch 1 ran on host2 and host3 alone, host2's worker first (a failing epoch may be followed by
        # another, on the same hosts, if --max-restarts allows it).
        done = [l.split("] ", 1)[-1] for l in out.splitlines() if "done " in l]
        self.assertEqual(sorted(l for l in done if " epoch 1 " in l),
                         [f"done 0/2 epoch 1 on {HOSTS[1]}", f"done 1/2 epoch 1 on {HOSTS[2]}"], out + err)
        self.assertFalse([l for l in done if HOSTS[0] in l], out + err)
        # The standby's own word, as its host's distrun said it, and the launcher's on node 0's loss.
        self.assertIn(f"distrun[{HOSTS[1]}]: ", err)
        self.assertIn(STANDBY_TOOK_OVER, err)

    def test_node_0s_host_killed_the_standby_takes_over_and_the_job_ends_well(self):
        p = self.start(0)
        self.kill_host_0()
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        self.assert_went_on_without_host_0(out, err)
        self.assertIn(LOST_BY_SSH, err)
        self.assert_nothing_left()

    def test_node_0s_host_killed_the_job_ends_with_the_next_epochs_code(self):
        p = self.start(3)
        self.kill_host_0()
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 3, err)
        self.assert_went_on_without_host_0(out, err)
        self.assertIn(f"distrun[{HOSTS[1]}]: error: no restarts left (--max-restarts 1); exiting with the failed "
                      "worker's code 3", err)
        self.assertIn(LOST_BY_SSH, err)
        self.assert_nothing_left()

    def test_node_0s_host_cut_off_fences_itself_and_the_standby_goes_on(self):
        p = self.start(0)
        cut(HOSTS[0])
        # Cut off from every other node, node 0 fences itself (and hears nothing from the launcher either):
        # nothing of the job is left on host1 while it is still cut off.
        gone = wait_for(lambda: count_on(HOSTS[0], self.marker_value) == 0, timeout=20)
        # The link back before ssh gives up on it (3 keep-alives of --heartbeat-timeout): node 0's exit (75)
        # may still reach the launcher, which must not take it for the job's.
        restore(HOSTS[0])
        out, err = p.communicate(timeout=60)
        self.assertTrue(gone, err)
        self.assertEqual(p.returncode, 0, err)
        self.assert_went_on_without_host_0(out, err)
        self.assertTrue(LOST_BY_SSH in err or LEFT_FENCED in err, err)
        self.assert_nothing_left()


if __name__ == "__main__":
    unittest.main(verbosity=2)
