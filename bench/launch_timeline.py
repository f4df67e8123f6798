#!/usr/bin/python3
"""Where a local launch's time goes: the phases of `distrun --nproc-per-node N -- /bin/true`, from uprobes.

Registers uprobes (tracefs, root) at the entry and return of the launcher's phase functions and follows
the launch with ftrace's event-fork filter (no perf: perf's per-thread event inheritance makes each
thread creation cost ~1 ms and would distort the very thing measured). Runs the launch ROUNDS times and
prints the median start and length of each phase, in ms since distrun's exec.

    bench/launch_timeline.py [--distrun build/release/distrun] [--workers 8] [--rounds 30]

Uprobes cost ~1-2 us per hit (about 60 hits a launch): the sum is ~0.1 ms above an untraced launch.
Phases on other threads (the module's load, the sentinel's start) overlap the main thread's. A function
called more than once (MakePlan, per-worker steps) shows its first call's start and the sum of its calls'
lengths; each hit's probe cost (~2 us) is in that sum.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

TRACING = "/sys/kernel/tracing"
GROUP = "distrun_tl"

# (name, binary: "distrun" or "module", demangled prefix)
PROBES = [
    ("parse", "distrun", "distrun::ParseCommandLine("),
    ("environment", "distrun", "distrun::Environment::FromProcess("),
    ("options", "distrun", "distrun::ResolveOptions("),
    ("detect", "distrun", "distrun::DetectTopology("),
    ("layout", "distrun", "distrun::ComputeLocalLayout("),
    ("check_program", "distrun", "distrun::CheckMpiProgram("),
    ("module_load", "distrun", "distrun::RuntimeModule::Load("),
    ("supervisor", "distrun", "distrun::Supervisor::Supervisor("),
    ("set_up", "distrun", "distrun::Supervisor::SetUpProcess("),
    ("sentinel_start", "distrun", "distrun::Sentinel::Start("),
    ("open_link", "distrun", "distrun::RuntimeModule::OpenLink("),
    ("service", "module", "distrun::RuntimeLink::StartService("),
    ("agent", "module", "distrun::Agent::Agent("),
    ("await_sentinel", "distrun", "distrun::Supervisor::AwaitSentinel("),
    ("join_round", "distrun", "distrun::Supervisor::JoinRound("),
    ("spawn", "distrun", "distrun::Spawner::Start("),
    ("loop", "distrun", "distrun::Supervisor::Loop("),
    ("teardown", "distrun", "distrun::Supervisor::~Supervisor("),
    # Called once per plan or per worker: the first call's start, the sum of all calls' lengths.
    ("make_plan", "distrun", "distrun::MakePlan("),
    ("start_workers", "distrun", "distrun::Supervisor::StartWorkers("),
    ("fingerprints", "distrun", "distrun::FingerprintOf("),
    ("worker_env", "distrun", "distrun::Supervisor::WorkerEnvironment["),
    ("output_start", "distrun", "distrun::Output::StartWorker("),
]


def symbols(path):
    """{demangled: address} of the defined functions of an ELF file (first of several)."""
    out = subprocess.run(f"nm --defined-only {path} | c++filt", shell=True, capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "Tt" and ".cold" not in parts[2]:
            found.setdefault(parts[2], int(parts[0], 16))
    return found


def write(path, text, append=False):
    # os.open: Python's buffered append mode seeks to the end, which tracefs refuses.
    fd = os.open(os.path.join(TRACING, path), os.O_WRONLY | (os.O_APPEND if append else os.O_TRUNC))
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def unregister():
    for name, _, _ in PROBES:
        for kind in "er":
            try:
                write("uprobe_events", f"-:{GROUP}/{kind}_{name}\n", append=True)
            except OSError:
                pass  # not registered


def register(files):
    unregister()
    for name, which, prefix in PROBES:
        path = files[which]
        table = symbols(path)
        addr = next((a for s, a in table.items() if s.startswith(prefix)), None)
        if addr is None:
            print(f"launch_timeline: {prefix} not found in {path} (inlined?); phase {name} left out",
                  file=sys.stderr)
            continue
        write("uprobe_events", f"p:{GROUP}/e_{name} {path}:0x{addr:x}\n", append=True)
        write("uprobe_events", f"r:{GROUP}/r_{name} {path}:0x{addr:x}\n", append=True)


def trace_once(argv):
    write("tracing_on", "0")
    write("trace", "")
    write("options/event-fork", "1")
    write("set_event_pid", str(os.getpid()))
    write(f"events/{GROUP}/enable", "1")
    for e in ("sched_process_exec", "sched_process_exit"):
        write(f"events/sched/{e}/enable", "1")
    write("tracing_on", "1")
    subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    write("tracing_on", "0")
    write(f"events/{GROUP}/enable", "0")
    for e in ("sched_process_exec", "sched_process_exit"):
        write(f"events/sched/{e}/enable", "0")
    write("set_event_pid", "")
    with open(os.path.join(TRACING, "trace")) as f:
        text = f.read()
    events = []
    for line in text.splitlines():
        m = re.match(r"\s*(\S+)-(\d+)\s.*?\s(\d+\.\d+): (\S+):", line)
        if m:
            events.append((float(m.group(3)) * 1000, m.group(1), int(m.group(2)), m.group(4)))
    return events


def phases(events):
    """{phase: (start, length)} in ms since distrun's exec; the process's exit as 'exit'."""
    t0 = next((t for t, comm, _, ev in events if ev == "sched_process_exec" and comm == "distrun"), None)
    if t0 is None:
        return {}
    main_tid = next(tid for t, comm, tid, ev in events if ev == "sched_process_exec" and comm == "distrun")
    out, open_at = {}, {}
    first_worker, last_worker_exit = None, None
    for t, comm, tid, ev in events:
        if ev.startswith("e_"):
            open_at[ev[2:]] = t
        elif ev.startswith("r_") and ev[2:] in open_at:
            # A phase called again (one thread at a time): its first start, the sum of its lengths.
            start = open_at.pop(ev[2:])
            first, total = out.get(ev[2:], (start - t0, 0.0))
            out[ev[2:]] = (first, total + t - start)
        elif ev == "sched_process_exec" and comm == "true":
            first_worker = first_worker if first_worker is not None else t - t0
        elif ev == "sched_process_exit" and comm == "true":
            last_worker_exit = t - t0
        elif ev == "sched_process_exit" and tid == main_tid:
            out["exit"] = (t - t0, 0.0)
    if first_worker is not None:
        out["first worker exec"] = (first_worker, 0.0)
    if last_worker_exit is not None:
        out["last worker exit"] = (last_worker_exit, 0.0)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--distrun", default=os.path.join(here, "..", "build", "release", "distrun"))
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=30)
    args = p.parse_args()
    distrun = os.path.realpath(args.distrun)
    files = {"distrun": distrun, "module": os.path.join(os.path.dirname(distrun), "distrun-runtime.so")}
    register(files)
    argv = [distrun, "--nproc-per-node", str(args.workers), "--", "/bin/true"]
    runs = []
    try:
        for _ in range(args.rounds):
            runs.append(phases(trace_once(argv)))
    finally:
        unregister()
    names = [n for n, _, _ in PROBES] + ["first worker exec", "last worker exit", "exit"]
    print(f"{' '.join(argv)}: {args.rounds} rounds, medians in ms since exec")
    print(f"  {'phase':<20} {'start':>7} {'length':>7}")
    for name in names:
        seen = [r[name] for r in runs if name in r]
        if not seen:
            continue
        start = statistics.median(s for s, _ in seen)
        length = statistics.median(length for _, length in seen)
        print(f"  {name:<20} {start:7.3f} {length:7.3f}")


if __name__ == "__main__":
    main()
