"""Worker output through distrun: prefixes, whole lines even when workers write long lines at the same
time, stdout and stderr kept apart, --log-dir files, --ranks-filter, and colour only on a terminal."""
import os
import pty
import re
import select
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN, run  # noqa: E402
from launch_helpers import BASE_PATH, PYTHON, LaunchCase, wait_for  # noqa: E402

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class Prefixes(LaunchCase):
    def test_several_workers_are_tagged_by_default(self):
        r = run(["--nproc-per-node", "3", "--", "sh", "-c", "echo out; echo err >&2"], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), ["[0] out", "[1] out", "[2] out"])
        self.assertEqual(sorted(r.stderr.splitlines()), ["[0] err", "[1] err", "[2] err"])

    def test_one_worker_is_not_tagged_unless_asked(self):
        r = run(["--", "echo", "plain"], env=self.env())
        self.assertEqual(r.stdout, "plain\n")
        r = run(["--tag-output", "on", "--", "echo", "tagged"], env=self.env())
        self.assertEqual(r.stdout, "[0] tagged\n")
        r = run(["--nproc-per-node", "2", "--tag-output", "off", "--", "echo", "x"], env=self.env())
        self.assertEqual(r.stdout, "x\nx\n")

    def test_template_placeholders(self):
        r = run(["--nproc-per-node", "2", "--tag-template", "{host}/{local_rank}/{rank}| ", "--", "echo", "hi"],
                env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        host = os.uname().nodename
        self.assertEqual(sorted(r.stdout.splitlines()), [f"{host}/0/0| hi", f"{host}/1/1| hi"])

    def test_bad_template_is_a_usage_error(self):
        r = run(["--tag-template", "[{node}] ", "--", "true"], env=self.env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("{node}", r.stderr)

    def test_partial_last_line_gets_a_newline(self):
        r = run(["--", "printf", "no newline"], env=self.env())
        self.assertEqual(r.stdout, "no newline\n")
        r = run(["--tag-output", "on", "--", "sh", "-c", "printf 'a\\nb'; printf 'c' >&2"], env=self.env())
        self.assertEqual(r.stdout, "[0] a\n[0] b\n")
        self.assertEqual(r.stderr, "[0] c\n")

    def test_no_colour_when_not_a_terminal(self):
        r = run(["--nproc-per-node", "2", "--", "sh", "-c", "echo x; echo y >&2; exit 1"], env=self.env())
        self.assertNotIn("\x1b", r.stdout)
        self.assertNotIn("\x1b", r.stderr)

    def test_colour_on_a_terminal(self):
        primary, secondary = pty.openpty()
        p = subprocess.Popen([DISTRUN, "--nproc-per-node", "2", "--", "echo", "x"], stdout=secondary,
                             stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                             env={"PATH": BASE_PATH, self.marker_name: self.marker_value})
        os.close(secondary)
        out = b""
        while True:
            ready, _, _ = select.select([primary], [], [], 20)
            if not ready:
                break
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not chunk:
                break
            out += chunk
        os.close(primary)
        p.communicate(timeout=20)
        text = out.decode()
        self.assertEqual(p.returncode, 0)
        self.assertIn("\x1b[", text)
        self.assertEqual(sorted(ANSI.sub("", text).replace("\r", "").splitlines()), ["[0] x", "[1] x"])


class WholeLines(LaunchCase):
    def test_long_lines_from_concurrent_workers_never_interleave(self):
        workers, lines, size = 4, 20, 100 * 1024
        writer = ("import os, sys\n"
                  "r = int(os.environ['RANK'])\n"
                  f"line = chr(ord('a') + r) * {size} + '\\n'\n"
                  f"for i in range({lines}):\n"
                  "    os.write(1, line.encode()); os.write(2, line.upper().encode())\n")
        r = run(["--nproc-per-node", str(workers), "--", PYTHON, "-c", writer], env=self.env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        for stream, case in ((r.stdout, str.lower), (r.stderr, str.upper)):
            got = stream.split("\n")
            self.assertEqual(got[-1], "")
            got = got[:-1]
            self.assertEqual(len(got), workers * lines)
            counts = {}
            for text in got:
                m = re.fullmatch(r"\[(\d)\] (.*)", text, re.S)
                self.assertIsNotNone(m, text[:80])
                rank = int(m.group(1))
                self.assertEqual(m.group(2), case(chr(ord("a") + rank)) * size, f"line of rank {rank} is mixed")
                counts[rank] = counts.get(rank, 0) + 1
            self.assertEqual(counts, {rank: lines for rank in range(workers)})

    def test_endless_line_is_passed_on_in_one_mebibyte_pieces(self):
        writer = "import sys; sys.stdout.write('x' * (5 * 1024 * 1024 // 2) + '\\n')"
        r = run(["--tag-output", "on", "--", PYTHON, "-c", writer], env=self.env(), timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        pieces = r.stdout.split("\n")[:-1]
        self.assertEqual([len(p) for p in pieces], [4 + 1048576, 4 + 1048576, 4 + 524288])
        self.assertTrue(all(p.startswith("[0] x") for p in pieces))


class ClosedConsole(LaunchCase):
    def test_workers_see_a_closed_stdout_as_they_would_without_distrun(self):
        # `distrun -- yes | head -1`: yes gets SIGPIPE and the job ends with 128 + SIGPIPE.
        p = self.popen(["--nproc-per-node", "2", "--", "yes"])
        p.stdout.readline()
        p.stdout.close()
        p.wait(timeout=20)
        self.assertEqual(p.returncode, 128 + 13)
        self.no_process_left()

    def test_with_log_dir_the_job_goes_on_and_the_files_get_everything(self):
        logs = self.path("logs")
        p = self.popen(["--log-dir", logs, "--", "sh", "-c", f"touch {self.dir}/ready; exec yes"])
        p.stdout.readline()
        p.stdout.close()
        self.wait_for_files("ready")
        size = lambda: os.path.getsize(os.path.join(logs, "rank-0.out"))  # noqa: E731
        first = size()
        self.assertTrue(wait_for(lambda: size() > first + 100000), "yes keeps writing to the file")
        self.assertIsNone(p.poll())
        p.terminate()
        p.wait(timeout=20)
        self.assertEqual(p.returncode, 143)


class Files(LaunchCase):
    def test_log_dir_gets_every_rank_and_the_console_only_the_filtered_ones(self):
        logs = self.path("logs", "nested")
        script = 'echo "out $RANK"; printf "partial $RANK"; echo "err $RANK" >&2'
        r = run(["--nproc-per-node", "4", "--log-dir", logs, "--ranks-filter", "0,3", "--", "sh", "-c", script],
                env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(r.stdout.splitlines()), ["[0] out 0", "[0] partial 0", "[3] out 3", "[3] partial 3"])
        self.assertEqual(sorted(r.stderr.splitlines()), ["[0] err 0", "[3] err 3"])
        self.assertEqual(sorted(os.listdir(logs)),
                         sorted(f"rank-{i}.{s}" for i in range(4) for s in ("out", "err")))
        for i in range(4):
            with open(os.path.join(logs, f"rank-{i}.out")) as f:
                self.assertEqual(f.read(), f"out {i}\npartial {i}", "files hold the worker's bytes as written")
            with open(os.path.join(logs, f"rank-{i}.err")) as f:
                self.assertEqual(f.read(), f"err {i}\n")

    def test_log_files_span_restarts(self):
        logs = self.path("logs")
        script = 'echo "attempt $DISTRUN_RESTART_COUNT"; [ "$DISTRUN_RESTART_COUNT" = 1 ]'
        r = run(["--log-dir", logs, "--max-restarts", "1", "--", "sh", "-c", script], env=self.env())
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(logs, "rank-0.out")) as f:
            self.assertEqual(f.read(), "attempt 0\nattempt 1\n")

    def test_unusable_log_dir_is_a_usage_error(self):
        blocker = self.path("file")
        open(blocker, "w").close()
        r = run(["--log-dir", os.path.join(blocker, "logs"), "--", "true"], env=self.env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--log-dir", r.stderr)

    def test_ranks_filter_from_the_environment_and_bad_values(self):
        r = run(["--nproc-per-node", "3", "--", "sh", "-c", "echo $RANK"], env=self.env(DISTRUN_RANKS_FILTER="1-2"))
        self.assertEqual(sorted(r.stdout.splitlines()), ["[1] 1", "[2] 2"])
        r = run(["--ranks-filter", "one", "--", "true"], env=self.env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("--ranks-filter", r.stderr)

    def test_summary_shows_stderr_even_of_filtered_ranks(self):
        r = run(["--nproc-per-node", "2", "--ranks-filter", "0", "--", "sh", "-c",
                 '[ "$RANK" = 1 ] && { echo "hidden reason" >&2; exit 2; }; exec sleep 60'], env=self.env())
        self.assertEqual(r.returncode, 2)
        self.assertIn("hidden reason", r.stderr)
        self.assertNotIn("[1] hidden reason", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
