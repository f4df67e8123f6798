#!/usr/bin/python3
"""Launching over ssh on the ssh lab (tests/ssh/lab.sh): distrun -H against Open MPI's mpirun -H (over ssh,
its default tree spawn) and pdsh (-R ssh), from the lab's login host, for H hosts x 2 workers of the same
tiny program (`mktemp DIR/w.XXXXXX`: it creates a file and exits). Per trial, on this machine's clock:
  running  command -> every worker has started (the latest worker file's change time)
  exit     command -> the launcher has exited
Trials alternate the three launchers. Then the teardown: each launcher's workers are `sleep` processes, the
launcher is SIGKILLed once all run, and the time until the last worker on any host is gone (distrun: its
hosts' distruns see the channel close; the others: nothing may end them, counted after 15 s).
Run as root; the lab is brought up with --hosts hosts and taken down at the end:

    bench/ssh_launch_bench.py --distrun build/release/distrun --hosts 3 --trials 10
    bench/ssh_launch_bench.py --distrun build/release/distrun --hosts 16 --trials 10
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
LAB_SH = os.path.join(REPO, "tests", "ssh", "lab.sh")


def lab_env(hosts):
    env = dict(os.environ)
    env["DISTRUN_SSH_LAB_HOSTS"] = str(hosts)
    return env


def login_pid(env):
    lab = env.get("DISTRUN_SSH_LAB_DIR", "/run/distrun-sshlab")
    with open(os.path.join(lab, "pids", "sshlogin.pid")) as f:
        return f.read().strip()


def on_login(env, args):
    return ["nsenter", "--target", login_pid(env), "--net", "--uts", "--mount", "--", *args]


def commands(tool, distrun, hosts, worker):
    names = [f"host{i}" for i in range(1, hosts + 1)]
    if tool.startswith("distrun"):  # distrun, or distrun+cN: --ssh-concurrency N
        extra = ["--ssh-concurrency", tool.split("+c", 1)[1]] if "+c" in tool else []
        return [distrun, *extra, "-H", ",".join(f"{h}:2" for h in names), "--", *worker]
    if tool == "mpirun":
        return ["mpirun", "--allow-run-as-root", "-H", ",".join(f"{h}:2" for h in names), "-np", str(2 * hosts),
                *worker]
    if tool == "pdsh":
        line = " ".join(worker)
        return ["pdsh", "-R", "ssh", "-f", "64", "-w", ",".join(names), f"{line} & {line}; wait"]
    raise ValueError(tool)


def one_launch(env, tool, distrun, hosts, job_dir):
    os.makedirs(job_dir)
    worker = ["mktemp", os.path.join(job_dir, "w.XXXXXX")]
    start = time.time_ns()
    r = subprocess.run(on_login(env, commands(tool, distrun, hosts, worker)), capture_output=True, text=True,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, timeout=120)
    end = time.time_ns()
    files = [os.path.join(job_dir, f) for f in os.listdir(job_dir)]
    if r.returncode != 0 or len(files) != 2 * hosts:
        raise RuntimeError(f"{tool}: exit {r.returncode}, {len(files)} of {2 * hosts} workers\n{r.stderr[-2000:]}")
    latest = max(os.stat(f).st_ctime_ns for f in files)
    shutil.rmtree(job_dir)
    return (latest - start) / 1e9, (end - start) / 1e9


def sleepers(tag):
    """PIDs of the workers of a teardown trial (their command line names `tag`)."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv[:1] == [b"sleep"] and tag.encode() in argv and state != "Z":
            found.append(int(name))
    return found


def one_teardown(env, tool, distrun, hosts, n):
    tag = f"{600 + n}.{random.randrange(10**6):06d}"
    p = subprocess.Popen(on_login(env, commands(tool, distrun, hosts, ["sleep", tag])),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    deadline = time.monotonic() + 60
    while len(sleepers(tag)) < 2 * hosts and time.monotonic() < deadline:
        time.sleep(0.02)
    p.kill()  # nsenter execs the launcher: this is the launcher itself
    killed = time.monotonic()
    p.wait()
    gone = None
    while time.monotonic() - killed < 15:
        if not sleepers(tag):
            gone = time.monotonic() - killed
            break
        time.sleep(0.01)
    left = sleepers(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    return gone, len(left)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--distrun", default=os.path.join(REPO, "build", "release", "distrun"))
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--teardown-trials", type=int, default=3)
    ap.add_argument("--tools", default="distrun,mpirun,pdsh",
                    help="comma-separated; distrun+cN is distrun with --ssh-concurrency N")
    ap.add_argument("--keep-lab", action="store_true", help="leave the lab up at the end")
    args = ap.parse_args()
    distrun = os.path.abspath(args.distrun)
    tools = args.tools.split(",")
    env = lab_env(args.hosts)
    subprocess.run([LAB_SH, "up"], env=env, check=True, capture_output=True)
    jobs = os.path.join(env.get("DISTRUN_SSH_LAB_DIR", "/run/distrun-sshlab"), "jobs")
    try:
        results = {t: {"running": [], "exit": []} for t in tools}
        for trial in range(args.trials + 1):  # the first round warms the caches and is not counted
            for tool in tools:
                running, exited = one_launch(env, tool, distrun, args.hosts, os.path.join(jobs, f"b-{tool}-{trial}"))
                if trial > 0:
                    results[tool]["running"].append(running)
                    results[tool]["exit"].append(exited)
        teardown = {t: [] for t in tools}
        for n in range(args.teardown_trials):
            for tool in tools:
                teardown[tool].append(one_teardown(env, tool, distrun, args.hosts, n))
    finally:
        if not args.keep_lab:
            subprocess.run([LAB_SH, "down"], env=env, capture_output=True)
    print(f"{args.hosts} hosts x 2 workers, {args.trials} trials each (medians; min-max), on {os.cpu_count()} CPUs")
    print(f"{'launcher':10} {'running s':>22} {'exit s':>22} {'teardown: gone after s / left after 15 s':>44}")
    base = statistics.median(results[tools[0]]["exit"])
    for tool in tools:
        r, e = results[tool]["running"], results[tool]["exit"]
        tear = ", ".join("-" if g is None else f"{g:.2f}" for g, _ in teardown[tool])
        left = sum(l for _, l in teardown[tool])
        print(f"{tool:10} {statistics.median(r):7.3f} ({min(r):.3f}-{max(r):.3f}) "
              f"{statistics.median(e):7.3f} ({min(e):.3f}-{max(e):.3f})   {tear} / {left} left")
    for tool in tools[1:]:
        print(f"ratio {tool}/{tools[0]}: running "
              f"{statistics.median(results[tool]['running']) / statistics.median(results[tools[0]]['running']):.2f}, "
              f"exit {statistics.median(results[tool]['exit']) / base:.2f}")
    print(json.dumps({"hosts": args.hosts, "results": results, "teardown": teardown}))


if __name__ == "__main__":
    sys.exit(main())
