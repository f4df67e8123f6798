#!/usr/bin/python3
"""The hang watch on one machine (local mode), with real Python workers that import the `distrun` module.

  /usr/bin/python3 bench/hang_bench.py --distrun build/release/distrun [--workers 16] [--runs 5]

1. Detection latency. WORKERS workers report progress (distrun.progress) every 50 ms for --steps steps, each
   printing the CLOCK_MONOTONIC time of its last report; then rank 1 sleeps forever in one function and the
   others wait in another for a file that never comes. distrun runs with --hang-timeout T. The bench reads
   distrun's stderr line by line as it arrives and stamps each line with CLOCK_MONOTONIC (time.monotonic()
   on both sides). The reference is the latest last report of any rank (the moment the least advanced rank
   last moved); from it: (a) the `hung:` line, (b) the `every stack:` line (the diagnosis printed), (c)
   distrun's exit. (a) - T is what the watch adds beyond the timeout.
2. `distrun stacks` wall time: rank 0 of a job of WORKERS workers (the others report progress every 50 ms)
   runs `distrun stacks` --stacks-calls times through subprocess and reports each call's wall time.
3. The watch's cost: distrun's own CPU time (utime + stime of /proc/PID/stat) over a --cpu-window of s while
   --cpu-workers workers loop on `time.sleep(0.01)` with `distrun.progress(i)` (reporting, ~100 steps/s
   each) or without it (quiet); the two kinds of job alternate --cpu-rounds times. distrun runs with its
   defaults (--hang-timeout auto).
4. `distrun-bench stack-merge --stacks 10000,100000`, when the distrun-bench next to distrun has it.

Prints a readable summary and, last, one JSON line with every figure. Runs the workers with the module of
this source tree (python/) and the client library of distrun's build (BUILD/lib/libdistrun_client.so.0,
or --library). distrun's TMPDIR is a scratch directory removed at the end (the stacks files land there)."""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
TICKS = os.sysconf("SC_CLK_TCK")

DETECT_WORKER = """\
import os, sys, time
import distrun
rank, steps, scratch = int(os.environ["RANK"]), int(sys.argv[1]), sys.argv[2]


def rank_1_sleeps_forever():
    time.sleep(3600)


def wait_for_a_file_that_never_comes(path):
    while not os.path.exists(path):
        time.sleep(0.05)


distrun.barrier("up", timeout=120)
for step in range(steps):
    distrun.progress(step)
    last = time.monotonic()
    time.sleep(0.05)
print(f"LAST {rank} {last:.6f}", flush=True)
if rank == 1:
    rank_1_sleeps_forever()
wait_for_a_file_that_never_comes(os.path.join(scratch, "never"))
"""

STACKS_WORKER = """\
import json, os, subprocess, sys, time
import distrun
rank, calls, scratch, exe = int(os.environ["RANK"]), int(sys.argv[1]), sys.argv[2], sys.argv[3]
done = os.path.join(scratch, "stacks-done")
distrun.barrier("up", timeout=120)
if rank == 0:
    time.sleep(0.5)  # every rank in its loop
    walls, first = [], None
    for i in range(calls):
        began = time.monotonic()
        r = subprocess.run([exe, "stacks"], capture_output=True, text=True)
        walls.append(time.monotonic() - began)
        if r.returncode != 0:
            print("STACKS-FAILED " + json.dumps({"rc": r.returncode, "out": r.stdout + r.stderr}), flush=True)
            break
        first = first or r.stdout + r.stderr
        time.sleep(0.2)
    print("STACKS " + json.dumps({"walls": walls, "first": first}), flush=True)
    open(done, "w").close()
else:
    i = 0
    while not os.path.exists(done):
        distrun.progress(i)
        i += 1
        time.sleep(0.05)
"""

CPU_WORKER = """\
import os, sys, time
import distrun
report, scratch = sys.argv[1] == "report", sys.argv[2]
stop = os.path.join(scratch, "cpu-stop")
distrun.barrier("up", timeout=120)
print("UP", flush=True)
i, began = 0, time.monotonic()
while True:
    if report:
        distrun.progress(i)
    time.sleep(0.01)
    i += 1
    if i % 50 == 0 and os.path.exists(stop):
        break
print(f"RATE {i / (time.monotonic() - began):.1f}", flush=True)
"""


class Job:
    """A distrun whose stdout and stderr lines are stamped with time.monotonic() as they arrive."""

    def __init__(self, cmd, env):
        self.lines = []  # (time, stream, text)
        self.cond = threading.Condition()
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, start_new_session=True)
        self.exited_at = None
        self.readers = [threading.Thread(target=self._read, args=(self.proc.stdout, "out"), daemon=True),
                        threading.Thread(target=self._read, args=(self.proc.stderr, "err"), daemon=True)]
        for t in self.readers:
            t.start()
        threading.Thread(target=self._wait, daemon=True).start()

    def _read(self, stream, name):
        for line in stream:
            now = time.monotonic()
            with self.cond:
                self.lines.append((now, name, line.rstrip("\n")))
                self.cond.notify_all()

    def _wait(self):
        self.proc.wait()
        now = time.monotonic()
        with self.cond:
            self.exited_at = now
            self.cond.notify_all()

    def wait_until(self, predicate, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
            return True

    def count(self, pattern, stream="out"):
        return sum(1 for _, s, text in self.lines if s == stream and re.search(pattern, text))

    def first(self, pattern, stream):
        for t, s, text in self.lines:
            if s == stream and re.search(pattern, text):
                return t, text
        return None

    def kill(self):
        """SIGKILLs the distrun this bench started (its sentinel then ends the workers) and waits for it."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()

    def finish(self, timeout):
        """Waits for the exit and for both pipes to close; kills distrun if it does not end."""
        if not self.wait_until(lambda: self.exited_at is not None, timeout):
            self.kill()
            raise RuntimeError(f"distrun did not end within {timeout}s:\n{self.text()}")
        for t in self.readers:
            t.join(10)
        return self.proc.returncode

    def text(self):
        return "\n".join(f"[{s}] {text}" for _, s, text in self.lines)


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime (fields 14 and 15)


def summary(values):
    return {"median": statistics.median(values), "max": max(values), "min": min(values)} if values else {}


def ms(x):
    return f"{x * 1000:.0f} ms"


class Bench:
    def __init__(self, args):
        self.args = args
        self.distrun = os.path.abspath(args.distrun)
        build = os.path.dirname(self.distrun)
        self.library = os.path.abspath(args.library or os.path.join(build, "lib", "libdistrun_client.so.0"))
        if not os.path.isfile(self.library):
            sys.exit(f"hang_bench: no client library at {self.library}; give --library")
        self.scratch = tempfile.mkdtemp(prefix="distrun-hang-bench-")
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "TMPDIR": self.scratch,
                    "PYTHONPATH": os.path.join(REPO, "python"), "DISTRUN_CLIENT_LIBRARY": self.library,
                    "PYTHONDONTWRITEBYTECODE": "1", "HOME": os.environ.get("HOME", "/root")}
        self.results = {"distrun": self.distrun, "library": self.library}
        self.jobs = []

    def script(self, name, text):
        path = os.path.join(self.scratch, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def job(self, nproc, distrun_args, worker_args):
        cmd = [self.distrun, "--nproc-per-node", str(nproc), "--tag-output", "off", *distrun_args, "--",
               PYTHON, *worker_args]
        job = Job(cmd, self.env)
        self.jobs.append(job)
        return job

    # -- 1 ------------------------------------------------------------------------------------------------
    def detection(self):
        a = self.args
        script = self.script("detect_worker.py", DETECT_WORKER)
        rows = []
        print(f"1. detection: {a.workers} workers, --hang-timeout {a.hang_timeout}, {a.steps} steps of 50 ms, "
              f"{a.runs} runs")
        for run in range(a.runs):
            job = self.job(a.workers, ["--hang-timeout", str(a.hang_timeout), "--grace-period", "5"],
                           [script, str(a.steps), self.scratch])
            rc = job.finish(timeout=120)
            lasts = [float(m.group(1)) for _, s, text in job.lines if s == "out"
                     for m in [re.match(r"LAST \d+ ([\d.]+)$", text)] if m]
            hung = job.first(r"distrun: error: hung:", "err")
            diag = job.first(r"^every stack: ", "err")
            if rc != 125 or len(lasts) != a.workers or not hung or not diag:
                raise RuntimeError(f"run {run}: distrun exited {rc}, {len(lasts)} LAST lines, "
                                   f"hung line {bool(hung)}, every-stack line {bool(diag)}:\n{job.text()}")
            ref = max(lasts)
            said = float(re.search(r"no progress for ([\d.]+)s", hung[1]).group(1))
            row = {"hung": hung[0] - ref, "diagnosis": diag[0] - ref, "exit": job.exited_at - ref,
                   "spread_of_last_reports": ref - min(lasts), "said": said,
                   "odd_rank_named": bool(job.first(r"rank 1 \(host .*pid \d+", "err")),
                   "stacks_line": (job.first(r"^stacks of \d+ ranks", "err") or (0, ""))[1]}
            rows.append(row)
            print(f"   run {run + 1}: hung {row['hung']:.3f} s, diagnosis {row['diagnosis']:.3f} s, "
                  f"exit {row['exit']:.3f} s after the last report (distrun said {said}s; "
                  f"{row['stacks_line']}; last reports spread over {ms(row['spread_of_last_reports'])})")
        res = {k: summary([r[k] for r in rows]) for k in ("hung", "diagnosis", "exit")}
        res["beyond_timeout"] = summary([r["hung"] - a.hang_timeout for r in rows])
        res["diagnosis_after_hung"] = summary([r["diagnosis"] - r["hung"] for r in rows])
        res["exit_after_diagnosis"] = summary([r["exit"] - r["diagnosis"] for r in rows])
        res["runs"] = rows
        res["hang_timeout"] = a.hang_timeout
        res["workers"] = a.workers
        for k, label in (("hung", "(a) hung line"), ("diagnosis", "(b) every stack line"),
                         ("exit", "(c) distrun exit"), ("beyond_timeout", "(a) - timeout"),
                         ("diagnosis_after_hung", "(b) - (a)"), ("exit_after_diagnosis", "(c) - (b)")):
            print(f"   {label:22s} median {res[k]['median']:.3f} s, max {res[k]['max']:.3f} s, "
                  f"min {res[k]['min']:.3f} s")
        self.results["detection"] = res

    # -- 2 ------------------------------------------------------------------------------------------------
    def stacks(self):
        a = self.args
        script = self.script("stacks_worker.py", STACKS_WORKER)
        print(f"2. distrun stacks: {a.workers} workers, {a.stacks_calls} calls from rank 0")
        job = self.job(a.workers, ["--hang-timeout", "off"], [script, str(a.stacks_calls), self.scratch,
                                                             self.distrun])
        rc = job.finish(timeout=120)
        found = job.first(r"^STACKS ", "out")
        if rc != 0 or not found:
            raise RuntimeError(f"distrun exited {rc}:\n{job.text()}")
        said = json.loads(found[1][len("STACKS "):])
        walls = said["walls"]
        head = said["first"].splitlines()[0] if said["first"] else ""
        res = summary(walls)
        res.update(calls=walls, first_line=head, workers=a.workers)
        print(f"   per call: {', '.join(ms(w) for w in walls)}")
        print(f"   median {ms(res['median'])}, max {ms(res['max'])}; the picture: {head}")
        self.results["stacks"] = res

    # -- 3 ------------------------------------------------------------------------------------------------
    def cpu(self):
        a = self.args
        script = self.script("cpu_worker.py", CPU_WORKER)
        stop = os.path.join(self.scratch, "cpu-stop")
        print(f"3. the watch's cost: distrun's CPU over {a.cpu_window:g} s, {a.cpu_workers} workers, "
              f"{a.cpu_rounds} rounds of (reporting, quiet)")
        rows = {"report": [], "quiet": []}
        for _ in range(a.cpu_rounds):
            for mode in ("report", "quiet"):
                if os.path.exists(stop):
                    os.unlink(stop)
                job = self.job(a.cpu_workers, [], [script, mode, self.scratch])
                job.wait_until(lambda: job.count(r"^UP$") == a.cpu_workers or job.exited_at is not None, 120)
                if job.count(r"^UP$") != a.cpu_workers:
                    job.kill()
                    raise RuntimeError(f"{mode}: the workers did not start:\n{job.text()}")
                time.sleep(1.0)  # past the start
                c0, t0 = cpu_seconds(job.proc.pid), time.monotonic()
                time.sleep(a.cpu_window)
                c1, t1 = cpu_seconds(job.proc.pid), time.monotonic()
                open(stop, "w").close()
                rc = job.finish(timeout=60)
                rates = [float(text.split()[1]) for _, s, text in job.lines if s == "out" and text.startswith("RATE ")]
                if rc != 0 or len(rates) != a.cpu_workers:
                    raise RuntimeError(f"{mode}: distrun exited {rc}, {len(rates)} RATE lines:\n{job.text()}")
                pct = 100 * (c1 - c0) / (t1 - t0)
                rows[mode].append({"cpu_percent": pct, "cpu_s": c1 - c0, "window_s": t1 - t0,
                                   "loops_per_s_per_worker": statistics.mean(rates)})
                print(f"   {mode:6s}: distrun {pct:.3f} % of a core ({c1 - c0:.2f} s CPU in {t1 - t0:.1f} s; "
                      f"workers looped {statistics.mean(rates):.0f}/s each)")
        res = {mode: {"cpu_percent": summary([r["cpu_percent"] for r in rs]), "runs": rs}
               for mode, rs in rows.items()}
        res["difference_percent"] = (res["report"]["cpu_percent"]["median"]
                                     - res["quiet"]["cpu_percent"]["median"])
        res["tick_resolution_percent"] = 100 / TICKS / a.cpu_window
        res["workers"] = a.cpu_workers
        print(f"   median reporting {res['report']['cpu_percent']['median']:.3f} %, quiet "
              f"{res['quiet']['cpu_percent']['median']:.3f} %, difference {res['difference_percent']:+.3f} % of "
              f"a core (resolution {res['tick_resolution_percent']:.3f} %: one clock tick over the window)")
        self.results["cpu"] = res

    # -- 4 ------------------------------------------------------------------------------------------------
    def stack_merge(self):
        bench = os.path.join(os.path.dirname(self.distrun), "bench", "distrun-bench")
        print("4. distrun-bench stack-merge")
        if not os.access(bench, os.X_OK):
            print(f"   skipped: no {bench}")
            self.results["stack_merge"] = {"skipped": f"no {bench}"}
            return
        probe = subprocess.run([bench, "stack-merge", "--stacks", "1"], capture_output=True, text=True,
                               timeout=60)
        if "unknown benchmark" in probe.stdout + probe.stderr:
            print(f"   skipped: {bench} has no stack-merge")
            self.results["stack_merge"] = {"skipped": f"{bench} has no stack-merge"}
            return
        r = subprocess.run([bench, "stack-merge", "--stacks", self.args.merge_stacks], capture_output=True,
                           text=True, timeout=600)
        print(r.stdout + r.stderr)
        self.results["stack_merge"] = {"rc": r.returncode, "output": r.stdout + r.stderr}

    def close(self):
        for job in self.jobs:
            job.kill()  # only a job an error left running is still there
        shutil.rmtree(self.scratch, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--distrun", required=True)
    p.add_argument("--library", help="the client library (default: DISTRUN_DIR/lib/libdistrun_client.so.0)")
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--hang-timeout", type=float, default=3)
    p.add_argument("--steps", type=int, default=20, help="50 ms steps before the workers stop reporting")
    p.add_argument("--stacks-calls", type=int, default=10)
    p.add_argument("--cpu-workers", type=int, default=8)
    p.add_argument("--cpu-window", type=float, default=20)
    p.add_argument("--cpu-rounds", type=int, default=2)
    p.add_argument("--merge-stacks", default="10000,100000")
    p.add_argument("--only", choices=["detection", "stacks", "cpu", "stack-merge"], action="append")
    args = p.parse_args()
    if args.hang_timeout == int(args.hang_timeout):
        args.hang_timeout = int(args.hang_timeout)
    bench = Bench(args)
    try:
        with open("/proc/loadavg") as f:
            bench.results["load_before"] = float(f.read().split()[0])
        print(f"hang_bench: {bench.distrun}, {os.cpu_count()} CPUs, load {bench.results['load_before']}")
        for name, fn in (("detection", bench.detection), ("stacks", bench.stacks), ("cpu", bench.cpu),
                         ("stack-merge", bench.stack_merge)):
            if not args.only or name in args.only:
                fn()
    finally:
        bench.close()
    print(json.dumps(bench.results, separators=(",", ":")))


if __name__ == "__main__":
    main()
