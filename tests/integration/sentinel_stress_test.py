"""distrun killed with SIGKILL while its workers start processes as fast as they can: its sentinel must
leave none of them running, including those it met inside execve (their environment cannot be read for a
moment). SENTINEL_ROUNDS rounds (default 30; bench: 1,000), each with a fresh marker: no process carrying
it may outlive the sweep."""
import os
import signal
import time
import unittest

from launch_helpers import LaunchCase, processes_with, wait_for

ROUNDS = int(os.environ.get("SENTINEL_ROUNDS", "30"))
# Two workers that never stop starting short-lived processes (each one exec after a fork, then another exec),
# and a long-lived one each, which the sweep must find too.
CHURN = os.environ.get("SENTINEL_CHURN") or ("while :; do /bin/sh -c 'exec /bin/true'; done & "
         "while :; do /bin/sh -c 'exec /bin/sh -c :'; done & exec sleep 600")


class SentinelUnderChurn(LaunchCase):
    def test_no_process_escapes_the_sweep(self):
        escaped = []
        for round_number in range(ROUNDS):
            marker = f"DISTRUN_STRESS_MARKER={os.getpid()}-{round_number}"
            name, value = marker.split("=", 1)
            p = self.popen(["--nproc-per-node", "2", "--", "sh", "-c", CHURN], env=self.env(**{name: value}))
            self.assertTrue(wait_for(lambda: len(processes_with(marker)) >= 6, timeout=20),
                            f"round {round_number}: the workers did not start")
            time.sleep(0.05 + 0.01 * (round_number % 10))  # the kill lands at varying points of the churn
            os.kill(p.pid, signal.SIGKILL)
            p.communicate()
            if not wait_for(lambda: not processes_with(marker), timeout=10):
                left = processes_with(marker)
                escaped.append((round_number, left))
                for pid in left:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        print(f"sentinel stress: {ROUNDS} rounds, {len(escaped)} with a process left", flush=True)
        self.assertEqual(escaped, [], f"processes outlived the sentinel's sweep in {len(escaped)} of {ROUNDS} rounds")


if __name__ == "__main__":
    unittest.main()
