"""torch's error files under distrun: every worker gets a TORCHELASTIC_ERROR_FILE of its own, and when the
failing worker's main is decorated with torch's @record (Debian's python3-torch), the failure summary shows
its exception and traceback."""
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402
from launch_helpers import PYTHON, LaunchCase  # noqa: E402

# Rank FAIL_RANK raises from a @record main (or, with PLAIN set, exits 3 after a stderr line, without
# @record); the others print their error file's path and wait to be stopped. The failing rank fails only
# once every rank has printed: torch's import takes seconds on a loaded machine, and a rank stopped before
# it printed would fail the test, not distrun.
WORKER = r"""
import os, sys, time
from torch.distributed.elastic.multiprocessing.errors import record

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
path = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
print(f"error-file {rank} {path}", flush=True)
marks = os.path.join(os.environ["MARKS"], os.environ["DISTRUN_RESTART_COUNT"])
os.makedirs(marks, exist_ok=True)
open(os.path.join(marks, str(rank)), "w").close()
if rank == int(os.environ["FAIL_RANK"]):
    deadline = time.monotonic() + 120
    while len(os.listdir(marks)) < world and time.monotonic() < deadline:
        time.sleep(0.02)

def check_learning_rate(lr):
    if lr < 0:
        raise ValueError(f"bad learning rate {lr} on rank {rank}")

@record
def main():
    if rank == int(os.environ["FAIL_RANK"]):
        time.sleep(0.3)
        check_learning_rate(-1)
    time.sleep(60)

if os.environ.get("PLAIN") == os.environ["DISTRUN_RESTART_COUNT"] and rank == int(os.environ["FAIL_RANK"]):
    print("plain failure without @record", file=sys.stderr, flush=True)
    sys.exit(3)
main()
"""


class TorchErrorFiles(LaunchCase):
    def launch(self, *extra, **env):
        script = self.path("worker.py")
        with open(script, "w") as f:
            f.write(WORKER)
        tmp = self.path("tmp")
        os.makedirs(tmp, exist_ok=True)
        marks = self.path("marks")
        return run(["--nproc-per-node", "3", "--tag-output", "off", "--grace-period", "5", *extra, "--",
                    PYTHON, script], env=self.env(TMPDIR=tmp, MARKS=marks, **env), timeout=240)

    def error_files(self, stdout):
        return {int(rank): path for _, rank, path in
                (line.split(" ", 2) for line in stdout.splitlines() if line.startswith("error-file "))}

    def test_summary_shows_the_exception_and_traceback_from_the_error_file(self):
        r = self.launch(FAIL_RANK="1")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("rank 1 failed first", r.stderr)
        self.assertIn("rank 1 raised (torch's error file):\n    ValueError: bad learning rate -1 on rank 1",
                      r.stderr)
        self.assertIn("  traceback:\n    Traceback (most recent call last):", r.stderr)
        self.assertIn(", in check_learning_rate\n", r.stderr)
        # One file per rank, in one private directory under TMPDIR that is gone with distrun.
        files = self.error_files(r.stdout)
        self.assertEqual(sorted(files), [0, 1, 2], r.stdout)
        self.assertEqual(len(set(files.values())), 3, files)
        self.assertEqual(len({os.path.dirname(p) for p in files.values()}), 1, files)
        self.assertEqual(os.path.dirname(os.path.dirname(files[0])), self.path("tmp"))
        self.assertEqual(os.listdir(self.path("tmp")), [])

    def test_log_dir_keeps_the_error_file(self):
        logs = self.path("logs")
        r = self.launch("--log-dir", logs, FAIL_RANK="2")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("ValueError: bad learning rate -1 on rank 2", r.stderr)
        with open(os.path.join(logs, "rank-0.out")) as f:
            self.assertEqual(self.error_files(f.read())[0], os.path.join(logs, "rank-0.error.json"))
        with open(os.path.join(logs, "rank-2.error.json")) as f:
            self.assertIn("bad learning rate -1 on rank 2", f.read())
        self.assertFalse(os.path.exists(os.path.join(logs, "rank-0.error.json")))

    def test_a_restart_never_reports_the_earlier_attempts_exception(self):
        # Restart 0: rank 1 raises through @record. Restart 1: it exits 3 without writing an error file.
        r = self.launch("--max-restarts", "1", FAIL_RANK="1", PLAIN="1")
        self.assertEqual(r.returncode, 3, r.stdout + r.stderr)
        summary = r.stderr.split("rank 1 failed first")[-1]
        self.assertIn("plain failure without @record", summary)
        self.assertNotIn("raised (torch's error file)", summary)

    def test_without_the_torch_family_no_error_file_is_given(self):
        r = run(["--export", "distrun", "--", "/bin/sh", "-c", 'echo "file=${TORCHELASTIC_ERROR_FILE-unset}"'],
                env=self.env(TMPDIR=self.dir))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("file=unset", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
