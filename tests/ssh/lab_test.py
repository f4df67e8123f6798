"""The ssh lab itself, in a few seconds: every host answers ssh by its name, plain ssh and pdsh work on the
login host, each failing host fails the way it should, a cut host stalls and answers again once restored,
remote processes are found on their host, and `lab.sh status` says what it promises. Needs no distrun.
`lab.sh down` is checked by run_tests.sh (status must then say that nothing is left)."""
import os
import signal
import threading
import time
import unittest

from ssh_harness import (BADKEY, CLOSED, HOSTS, IPS, LAB, LOGIN, NOKEY, NOWHERE, PYTHON, SILENT, SSH_ERRORS,
                         SSHD_HOSTS, SshCase, count_on, cut, host_of, is_cut, kill_on, lab, processes_on, restore,
                         ssh_args, sshd_pid, wait_for, wait_for_count)


class Reachable(SshCase):
    def test_every_host_answers_by_its_name(self):
        procs = {h: self.login_popen(ssh_args(h, ["hostname"])) for h in [LOGIN, *HOSTS]}
        for host, p in procs.items():
            out, err = p.communicate(timeout=30)
            self.assertEqual((p.returncode, out, err), (0, host + "\n", ""), host)

    def test_plain_ssh_and_pdsh_on_the_login_host(self):
        # sshlogin sees the lab's client config as /etc/ssh/ssh_config: commands as a user types them.
        r = self.login(["ssh", HOSTS[-1], "hostname"])
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, HOSTS[-1] + "\n", ""))
        r = self.login(["pdsh", "-R", "ssh", "-w", ",".join(HOSTS), "hostname"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), sorted(f"{h}: {h}" for h in HOSTS))

    def test_a_host_sees_the_lab_from_inside(self):
        r = self.ssh(HOSTS[0], ["/bin/sh", "-c", "cat /etc/hosts; echo ==; cat /etc/resolv.conf; echo ==; id -un"])
        self.assertEqual(r.returncode, 0, r.stderr)
        hosts_file, resolv, user = r.stdout.split("==\n")
        for host, ip in IPS.items():
            self.assertIn(f"{ip} {host}\n", hosts_file)
        self.assertNotIn(NOWHERE, hosts_file)
        self.assertEqual((resolv, user), ("", "root\n"))


class FailingHosts(SshCase):
    def test_each_failing_host_fails_its_own_way(self):
        # All at once: hostsilent alone takes ConnectTimeout (2 s).
        results = {}

        def attempt(host):
            start = time.monotonic()
            p = self.login_popen(ssh_args(host, ["true"], ["-o", "ConnectTimeout=2"]))
            _, err = p.communicate(timeout=30)
            results[host] = (p.returncode, err, time.monotonic() - start)

        threads = [threading.Thread(target=attempt, args=(host,)) for host in SSH_ERRORS]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        errs = {host: err for host, (_, err, _) in results.items()}
        for host, (code, err, took) in results.items():
            with self.subTest(host=host):
                self.assertEqual(code, 255, err)
                self.assertIn(SSH_ERRORS[host], err.splitlines())
                if host == SILENT:
                    self.assertGreaterEqual(took, 1.9, err)
                else:
                    self.assertLess(took, 1.9, err)
        self.assertIn("WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!", errs[BADKEY])
        self.assertIn(f"Host key for {BADKEY} has changed and you have requested strict checking.",
                      errs[BADKEY].splitlines())

    def test_hostnokey_runs_a_real_sshd_with_a_host_key_known_to_the_client(self):
        # The refusal is the server's: the host key was accepted (no verification message) first.
        r = self.login(ssh_args(NOKEY, ["true"], ["-v"]))
        self.assertEqual(r.returncode, 255)
        self.assertIn(f"Host '{NOKEY}' is known and matches the ED25519 host key.", r.stderr)


class Cut(SshCase):
    def test_cut_stalls_a_session_and_new_connections_and_restore_brings_both_back(self):
        host = HOSTS[1 % len(HOSTS)]
        # A session that prints a line every 50 ms; each line's arrival time is noted here.
        p = self.login_popen(ssh_args(host, self.marked(["/bin/sh", "-c", "while echo tick; do sleep 0.05; done"])))
        arrivals = []
        threading.Thread(target=lambda: [arrivals.append(time.monotonic()) for _ in p.stdout], daemon=True).start()
        self.assertTrue(wait_for(lambda: len(arrivals) >= 5, timeout=10), p.stderr)

        cut(host)
        cut_at = time.monotonic()
        self.assertTrue(is_cut(host))
        r, took = self.timed(lambda: self.login(ssh_args(host, ["true"], ["-o", "ConnectTimeout=1"])))
        self.assertEqual(r.returncode, 255, r.stderr)
        self.assertIn(f"ssh: connect to host {host} port 22: Connection timed out", r.stderr.splitlines())
        self.assertGreaterEqual(took, 0.9)
        time.sleep(max(0.0, cut_at + 1.5 - time.monotonic()))
        during = [t for t in arrivals if cut_at + 0.3 < t]  # what was already in flight may land just after
        self.assertEqual(during, [], "lines arrived from a cut host")
        self.assertIsNone(p.poll(), "the session ended while its host was cut off (a reset?)")

        restore(host)
        restored_at = time.monotonic()
        self.assertFalse(is_cut(host))
        # The same session goes on (TCP retransmits; its backoff decides how soon) and new ones connect.
        self.assertTrue(wait_for(lambda: any(t > restored_at for t in arrivals), timeout=15),
                        "the session did not go on after restore")
        self.assertIsNone(p.poll())
        r = self.login(ssh_args(host, ["hostname"], ["-o", "ConnectTimeout=5"]))
        self.assertEqual((r.returncode, r.stdout), (0, host + "\n"), r.stderr)
        p.kill()
        p.communicate()
        # Without a terminal the remote loop learns of its client's end only when its next write fails.
        self.assertTrue(wait_for_count(host, self.marker_value, 0, timeout=10))

    def test_cut_and_restore_are_idempotent_and_know_every_host(self):
        host = HOSTS[0]
        for _ in range(2):
            cut(host)
        self.assertTrue(is_cut(host))
        for _ in range(2):
            restore(host)
        self.assertFalse(is_cut(host))
        r = lab("cut", NOWHERE)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("cut needs a lab host", r.stderr)


class Processes(SshCase):
    def test_remote_processes_are_found_on_their_host(self):
        first, second = HOSTS[0], HOSTS[-1]
        a = self.login_popen(ssh_args(first, self.marked(["sleep", "60"])))
        # A marker in the command line only (no environment): python's argv.
        tag = f"argv-{self.marker_value}"
        b = self.login_popen(ssh_args(second, [PYTHON, "-c", "import time; time.sleep(60)", tag]))
        env = ("environ",)
        self.assertTrue(wait_for_count(first, self.marker, 1, where=env), processes_on(first, self.marker))
        python = os.path.realpath(PYTHON)
        self.assertTrue(wait_for(lambda: python in map(exe_of, processes_on(second, tag))))
        if first != second:
            self.assertEqual(count_on(second, self.marker, env), 0)
            self.assertEqual(count_on(first, tag), 0)
        [remote] = processes_on(first, self.marker, env)
        self.assertEqual(host_of(remote), first)
        with open(f"/proc/{remote}/comm") as f:
            self.assertEqual(f.read().strip(), "sleep")
        # The remote shell (bash -c '...'), where it stays sleep's parent, has the marker in its command line.
        for pid in processes_on(first, self.marker):
            self.assertIn(pid, [remote, parent_of(remote)])
        # The local clients carry the marker in their environment, on sshlogin.
        self.assertEqual(sorted(processes_on(LOGIN, self.marker, env)), sorted([a.pid, b.pid]))

        # Killing the client does not end the remote command: no terminal, so no SIGHUP, and sleep writes
        # nothing that would fail. Whoever starts remote commands over ssh must end them some other way.
        a.kill()
        a.communicate()
        time.sleep(0.5)
        self.assertEqual(processes_on(first, self.marker, env), [remote])
        kill_on(first, self.marker)
        self.assertTrue(wait_for_count(first, self.marker, 0))
        b.kill()
        b.communicate()
        kill_on(second, tag)
        self.assertTrue(wait_for_count(second, tag, 0))

    def test_each_sshd_runs_on_its_own_host(self):
        for host in SSHD_HOSTS:
            config = os.path.join(LAB, "hosts", host, "sshd_config")
            self.assertIn(sshd_pid(host), processes_on(host, config), host)
            self.assertEqual(host_of(sshd_pid(host)), host)


def exe_of(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


class Status(SshCase):
    def status_lines(self):
        r = lab("status")
        self.assertEqual(r.returncode, 0, r.stderr)
        return {line.split()[0]: line for line in r.stdout.splitlines()}

    def test_status_of_a_lab_that_is_up(self):
        lines = self.status_lines()
        self.assertEqual(sorted(lines), sorted(IPS))
        for host, ip in IPS.items():
            self.assertEqual(lines[host].split()[1], ip)
        for host in SSHD_HOSTS:
            self.assertRegex(lines[host], rf"sshd PID {sshd_pid(host)}$")
        self.assertRegex(lines[CLOSED], r"no sshd: refuses port 22$")
        self.assertRegex(lines[SILENT], r"no sshd: drops port 22$")
        cut(HOSTS[0])
        try:
            self.assertRegex(self.status_lines()[HOSTS[0]], r", cut off$")
        finally:
            restore(HOSTS[0])
        self.assertNotIn("cut off", self.status_lines()[HOSTS[0]])

    def test_up_on_a_lab_that_is_up_changes_nothing(self):
        pids = {h: sshd_pid(h) for h in SSHD_HOSTS}
        r = lab("up")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already up", r.stderr)
        self.assertEqual({h: sshd_pid(h) for h in SSHD_HOSTS}, pids)

    def test_status_names_a_dead_sshd_and_up_rebuilds_the_lab(self):
        dead = sshd_pid(NOKEY)
        os.kill(dead, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: not os.path.exists(f"/proc/{dead}/net")))
        r = lab("status")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(f"{NOKEY}: sshd (PID {dead}) is not running", r.stderr)
        r = lab("up")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stderr, r"sshlab: up: ")
        self.assertEqual(lab("status").returncode, 0)
        self.assertNotEqual(sshd_pid(NOKEY), dead)
        # Fresh keys, and the lab works as before.
        r = self.login(ssh_args(HOSTS[0], ["hostname"]))
        self.assertEqual((r.returncode, r.stdout), (0, HOSTS[0] + "\n"), r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
