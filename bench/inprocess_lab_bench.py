#!/usr/bin/python3
"""Recovering in place on the Slurm lab (tests/cluster/lab.sh): a fault → every rank's next completed step,
with real PyTorch workers (gloo) that train in a loop (tests/integration/inprocess_worker.py's loop, with
timestamps), for --recovery in-process beside --recovery restart on the same job in the same run. Run as
root with the lab up:

    tests/cluster/lab.sh up
    bench/inprocess_lab_bench.py --distrun build/release/distrun --trials 30
    bench/inprocess_lab_bench.py --scenarios hundred          # 100 recoveries in a row in one job
    tests/cluster/lab.sh down

Scenarios, each trial a fresh `srun -N3 --no-kill` job of one distrun per host, two workers each:
  node      node2's distrun SIGKILLed (its sentinel ends its workers); --nnodes 2:3 --elastic-policy spares:
            node3 is the spare (in place: its workers wait with torch imported; restart: it has none)
  worker    one of node2's workers SIGKILLed (--max-restarts 5)
  frozen    node2's distrun and workers SIGSTOPped (spares as `node`; --heartbeat-timeout 2)
  hundred   one job (in place only), 100 workers killed one after another on node2 and node3 (each once the
            last recovery stepped): node1's workers' RSS, descriptors and threads after each, and each time
The time of a trial runs from the fault (this machine's clock, as the bench sends the signal) to the last
rank of the next world completing its first step there (each worker stamps its steps with the same clock).
The phases are node 0's line ("generation N recovered in place in ...: decided → notified → ready → agreed
→ group up → first step"); fault → decided is the trial's time less the line's first step.
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"
NODES = ["node1", "node2", "node3"]

# The worker: the loop of tests/integration/inprocess_worker.py with each step's time (time.time()).
WORKER = r"""
import os, sys, time
import torch
import torch.distributed as dist
import distrun
import distrun.torch as dt

out = sys.argv[1]
with open(os.path.join(out, f"warm-{os.getpid()}"), "w") as f:  # imports done (a spare's worker waits below)
    f.write(f"{time.time():.6f}")
world = dt.init_process_group("gloo")
state = torch.zeros(1000)
step = 0

def sync(world, state, step):
    box = torch.tensor([float(step)])
    if world.source is None:
        return torch.zeros_like(state), 0
    dist.broadcast(state, src=world.source)
    dist.broadcast(box, src=world.source)
    return state, int(box.item())

if world.new and world.generation > 0:
    state, step = sync(world, state, step)
log = open(os.path.join(out, f"steps-{os.getpid()}"), "a", buffering=1)
stop = os.path.join(out, "stop")
while True:
    try:
        # The last element says whether any rank saw the stop file: every rank stops at the same step.
        update = torch.full((1001,), float(step + 1))
        update[1000] = 1.0 if os.path.exists(stop) else 0.0
        dist.all_reduce(update)
        if update[1000].item() > 0:
            break
        state += update[:1000] / world.world_size
        step += 1
        distrun.progress(step)
        log.write(f"{time.time():.6f} {world.generation} {world.rank} {step}\n")
        time.sleep(0.02)
    except Exception as error:
        world = dt.recover(error)
        state, step = sync(world, state, step)
"""



class Lab:
    def __init__(self, directory):
        self.dir = directory
        self.conf = os.path.join(directory, "etc", "slurm.conf")
        if not os.path.exists(os.path.join(directory, "pids", "slurmctld.pid")):
            sys.exit(f"inprocess_lab_bench: the Slurm lab is not up under {directory}; run tests/cluster/lab.sh up")

    def slurmctld(self):
        with open(os.path.join(self.dir, "pids", "slurmctld.pid")) as f:
            return f.read().strip()

    def env(self, **extra):
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.conf, "PYTHONPATH": os.path.join(REPO, "python"),
               "DISTRUN_CLIENT_LIBRARY": extra.pop("library"), "PYTHONDONTWRITEBYTECODE": "1"}
        env.update(extra)
        return env


def pids_of(marker, test):
    """Processes whose environment holds `marker` and that pass `test(pid, cmdline, netns inode)`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker.encode() not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmdline = f.read().split(b"\0")
            if test(int(name), cmdline, os.stat(f"/proc/{name}/ns/net").st_ino):
                found.append(int(name))
        except OSError:
            pass
    return found


def netns(node):
    return os.stat(f"/run/netns/distrun-lab-{node}").st_ino


class Job:
    """One srun job of three distruns, two workers each, and what their workers logged."""

    def __init__(self, args, lab, in_place, distrun_args):
        self.args, self.lab = args, lab
        self.marker = "DISTRUN_BENCH_MARKER=" + uuid.uuid4().hex
        self.dir = os.path.join(lab.dir, "jobs", "bench-" + uuid.uuid4().hex[:12])
        os.makedirs(self.dir)
        script = os.path.join(self.dir, "worker.py")
        with open(script, "w") as f:
            f.write(WORKER)  # under restart, recover() re-raises and distrun starts every worker again
        library = os.path.join(os.path.dirname(os.path.abspath(args.distrun)), "lib", "libdistrun_client.so.0")
        env = lab.env(library=library, DISTRUN_BENCH_MARKER=self.marker.split("=", 1)[1],
                      DISTRUN_TOKEN=uuid.uuid4().hex)
        mode = ["--recovery", "in-process" if in_place else "restart"]
        self.proc = subprocess.Popen(
            ["nsenter", "--target", lab.slurmctld(), "--net", "--uts", "--mount", "--", "srun", "-N3", "--ntasks-per-node=1", "--no-kill",
             "--output", os.path.join(self.dir, "%t.out"), "--error", os.path.join(self.dir, "%t.err"),
             os.path.abspath(args.distrun), "--nproc-per-node", "2", "--grace-period", "3", *mode, *distrun_args,
             "--", PYTHON, script, self.dir],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def warm(self):
        return len([n for n in os.listdir(self.dir) if n.startswith("warm-")])

    def warm_times(self):
        """{pid: when its imports were done} of every worker so far."""
        out = {}
        for n in os.listdir(self.dir):
            if n.startswith("warm-"):
                with open(os.path.join(self.dir, n)) as f:
                    text = f.read().strip()
                if text:
                    out[int(n[5:])] = float(text)
        return out

    def steps(self):
        """(time, generation, rank, step) of every step logged so far."""
        rows = []
        for name in os.listdir(self.dir):
            if not name.startswith("steps-"):
                continue
            with open(os.path.join(self.dir, name)) as f:
                for line in f:
                    w = line.split()
                    if len(w) == 4:
                        rows.append((float(w[0]), int(w[1]), int(w[2]), int(w[3])))
        return rows

    def wait(self, predicate, timeout=120):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def workers_on(self, node):
        return pids_of(self.marker, lambda pid, cmd, ns: len(cmd) > 1 and cmd[1].endswith(b"worker.py") and ns == netns(node))

    def distrun_on(self, node):
        exe = os.path.realpath(self.args.distrun)
        def test(pid, cmd, ns):
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip() == "distrun" and os.path.realpath(f"/proc/{pid}/exe") == exe and ns == netns(node)
        return pids_of(self.marker, test)

    def node0_lines(self):
        path = os.path.join(self.dir, "0.err")
        return open(path).read() if os.path.exists(path) else ""

    def end(self):
        open(os.path.join(self.dir, "stop"), "w").close()
        try:
            self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
        for pid in pids_of(self.marker, lambda *a: True):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


PHASES = ("notified", "ready", "agreed", "group up", "first step")


def phases_of(text, generation):
    m = re.search(rf"generation {generation} recovered in place in [0-9.]+ s: .*?; decided(.*)", text)
    if not m:
        return {}
    return {name: float(ms) / 1000 for name, ms in re.findall(r"→ ([a-z ]+) (\d+) ms", m.group(1))}


def next_world_stepped(job, generation, ranks):
    """The time every one of `ranks` ranks completed a step in `generation`, or None."""
    first = {}
    for t, gen, rank, step in job.steps():
        if gen == generation:
            first[rank] = min(first.get(rank, t), t)
    return max(first.values()) if len(first) >= ranks else None


def trial(args, lab, scenario, in_place):
    distrun_args = {"node": ["--nnodes", "2:3", "--elastic-policy", "spares", "--heartbeat-timeout", "3"],
                    "frozen": ["--nnodes", "2:3", "--elastic-policy", "spares", "--heartbeat-timeout", "2"],
                    "worker": ["--max-restarts", "5", "--heartbeat-timeout", "5"]}[scenario]
    job = Job(args, lab, in_place, distrun_args)
    try:
        # Every worker stepped, and (in place) the spare's workers are warm: their imports done.
        warm = 6 if in_place or scenario == "worker" else 4
        if not job.wait(lambda: len({r for _, g, r, s in job.steps() if s >= 5}) >= 4 and job.warm() >= warm,
                        timeout=180):
            raise RuntimeError(f"the job did not step: {job.node0_lines()[-2000:]}")
        frozen = []
        warm_before = set(job.warm_times())
        fault = time.time()
        if scenario == "node":
            [victim] = job.distrun_on("node2")
            fault = time.time()
            os.kill(victim, signal.SIGKILL)
        elif scenario == "worker":
            victim = job.workers_on("node2")[0]
            fault = time.time()
            os.kill(victim, signal.SIGKILL)
        else:
            frozen = job.workers_on("node2") + job.distrun_on("node2")
            fault = time.time()
            for pid in frozen:
                os.kill(pid, signal.SIGSTOP)
        done = None
        if job.wait(lambda: next_world_stepped(job, 1, 4) is not None, timeout=180):
            done = next_world_stepped(job, 1, 4)
        for pid in frozen:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        if done is None:
            raise RuntimeError(f"no step in the next world: {job.node0_lines()[-3000:]}")
        phases = {}
        if in_place:
            job.wait(lambda: phases_of(job.node0_lines(), 1), timeout=10)
            phases = phases_of(job.node0_lines(), 1)
        if scenario == "worker" and in_place:
            # The replacement's own start: from the fault (its spawn follows within a few ms) to its imports.
            started = [t for pid, t in job.warm_times().items() if pid not in warm_before]
            if started:
                phases["replacement started"] = round(min(started) - fault, 4)
        return done - fault, phases
    finally:
        job.end()


def proc_numbers(pid):
    with open(f"/proc/{pid}/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return (int(status["VmRSS"].split()[0]), len(os.listdir(f"/proc/{pid}/fd")), int(status["Threads"]))


def hundred(args, lab):
    job = Job(args, lab, True, ["--max-restarts", "100", "--heartbeat-timeout", "5"])
    rows = []
    try:
        if not job.wait(lambda: len({r for _, g, r, s in job.steps() if s >= 5}) >= 6, timeout=180):
            raise RuntimeError("the job did not step")
        survivors = job.workers_on("node1")
        for k in range(args.hundred):
            gen = max(g for _, g, _, _ in job.steps())
            victims = job.workers_on("node2" if k % 2 == 0 else "node3")
            fault = time.time()
            os.kill(victims[0], signal.SIGKILL)
            if not job.wait(lambda: next_world_stepped(job, gen + 1, 6) is not None, timeout=180):
                raise RuntimeError(f"recovery {k} did not step: {job.node0_lines()[-2000:]}")
            took = next_world_stepped(job, gen + 1, 6) - fault
            numbers = [proc_numbers(pid) for pid in survivors]
            rows.append((k + 1, took, numbers))
            print(f"  recovery {k + 1}: {took:.3f} s; survivors (RSS kB, fds, threads): {numbers}", flush=True)
    finally:
        job.end()
    return rows


def summary(times):
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return statistics.median(times), p99, times[-1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--distrun", default=os.path.join(REPO, "build", "release", "distrun"))
    parser.add_argument("--lab", default=os.environ.get("DISTRUN_LAB_DIR", "/run/distrun-lab"))
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--restart-trials", type=int, default=10)
    parser.add_argument("--scenarios", default="node,worker,frozen")
    parser.add_argument("--hundred", type=int, default=100)
    args = parser.parse_args()
    lab = Lab(args.lab)
    results = {}
    for scenario in args.scenarios.split(","):
        if scenario == "hundred":
            rows = hundred(args, lab)
            times = [t for _, t, _ in rows]
            results["hundred"] = {"recoveries": len(rows), "first10_median_s": statistics.median(times[:10]),
                                  "last10_median_s": statistics.median(times[-10:]),
                                  "survivors_first": rows[0][2], "survivors_last": rows[-1][2]}
            print(json.dumps(results["hundred"]), flush=True)
            continue
        for in_place, trials in ((True, args.trials), (False, args.restart_trials)):
            times, phases = [], []
            for k in range(trials):
                took, ph = trial(args, lab, scenario, in_place)
                times.append(took)
                if ph:
                    phases.append(ph)
                print(f"  {scenario} {'in-process' if in_place else 'restart'} trial {k + 1}: {took:.3f} s {ph}",
                      flush=True)
            p50, p99, worst = summary(times)
            row = {"p50_s": round(p50, 4), "p99_s": round(p99, 4), "max_s": round(worst, 4), "trials": trials}
            if phases:
                row["phase_medians_s"] = {name: round(statistics.median(p[name] for p in phases if name in p), 4)
                                          for name in PHASES if any(name in p for p in phases)}
                beyond = [t - p["replacement started"] for t, p in zip(times, phases) if "replacement started" in p]
                if beyond:
                    row["beyond_replacement_start_p50_p99_s"] = [round(x, 4) for x in summary(beyond)[:2]]
                row["fault_to_decided_median_s"] = round(
                    statistics.median(t - p.get("first step", t) for t, p in zip(times, phases)), 4)
            results[f"{scenario}-{'in-process' if in_place else 'restart'}"] = row
            print(json.dumps({scenario + ("-in-process" if in_place else "-restart"): row}), flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
