#!/usr/bin/python3
"""Node loss on the Slurm lab (tests/cluster/lab.sh), with real launchers and real PyTorch workers (gloo)
that all-reduce in a loop: how long from the loss to the first worker of the next epoch running on every
surviving host. Run as root with the lab up:

    tests/cluster/lab.sh up
    bench/elastic_lab_bench.py --distrun build/release/distrun --trials 20 --torchrun-trials 3
    bench/elastic_lab_bench.py --victim node1 --scenarios kill,link --trials 20   # node 0, the coordinator
    tests/cluster/lab.sh down

Scenarios, each a fresh `srun -N3 --no-kill` job of one launcher per host and one worker per launcher:
  distrun-kill  SIGKILL of node3's distrun (`--nnodes 2:3`, every other setting distrun's default)
  distrun-link  node3's link goes down (`ip link set eth0 down` in its namespace)
  host-crash    every process of the job on node3 is SIGKILLed at once, for distrun and for torchrun
                (bench/torchrun_py311.py: `--nnodes 2:3 --rdzv_backend c10d --max_restarts 3`, its other
                settings torch 1.13's defaults), alternated trial by trial
  distrun-lossy node3's link drops --lossy-percent of the packets both ways for --lossy-seconds (nft in its
                namespace), a gray failure: the outcome of each trial is whether the job went on without
                node3, kept it, or ended (it must never end); 15 s after the link is good again the
                survivors' distruns must still run and their workers step
The victim is node3 unless --victim names another host: node1 hosts node 0, the job's coordinator, whose
loss the epoch's standby (node2) survives by taking the job over.
The time is from the loss (the kill, the link) to the latest of the survivors' workers of the next epoch
starting (the first line of the worker, before it imports torch), both read from this machine's clock.
"""
import argparse
import json
import os
import shutil
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

# The worker: says when it started (epoch, host), then all-reduces until the file "stop" appears.
WORKER = r"""
import os, socket, sys, time
started = time.time()
out = sys.argv[1]
epoch = os.environ.get("DISTRUN_EPOCH") or os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
tag = f"{epoch}-{socket.gethostname()}-{os.environ['RANK']}"
with open(f"{out}/start-{tag}", "w") as f:
    f.write(repr(started))
import torch
import torch.distributed as dist
dist.init_process_group("gloo")
world = dist.get_world_size()
step = 0
while not os.path.exists(f"{out}/stop"):
    value = torch.ones(1)
    dist.all_reduce(value)
    if value.item() != world:
        sys.exit(f"rank {os.environ['RANK']}: sum {value.item()} in a world of {world}")
    step += 1
    if step == 3:
        open(f"{out}/ready-{tag}", "w").close()
    time.sleep(0.05)
"""


class Lab:
    def __init__(self, directory):
        self.dir = directory
        self.conf = os.path.join(directory, "etc", "slurm.conf")
        if not os.path.exists(self.pid_file("slurmctld")):
            sys.exit(f"elastic_lab_bench: the Slurm lab is not up under {directory}; run tests/cluster/lab.sh up")

    def pid_file(self, name):
        return os.path.join(self.dir, "pids", f"{name}.pid")

    def pid(self, name):
        with open(self.pid_file(name)) as f:
            return int(f.read())

    def on_login_host(self, args):
        return ["nsenter", "--target", str(self.pid("slurmctld")), "--net", "--uts", "--mount", "--", *args]

    def resume_drained(self):
        """A host whose slurmstepd could not report its step's end over a lossy link is drained by Slurm
        ("Kill task failed"): put right between trials, saying so."""
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.conf}
        out = subprocess.run(self.on_login_host(["sinfo", "-h", "-N", "-t", "drained,draining", "-o", "%N|%E"]),
                             env=env, capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            node, _, reason = line.partition("|")
            if "Kill task failed" in reason:
                print(f"  note: Slurm drained {node} ({reason}); resuming it", file=sys.stderr, flush=True)
                subprocess.run(self.on_login_host(["scontrol", "update", f"nodename={node}", "state=resume"]),
                               env=env, check=False)

    def netns_inode(self, node):
        return os.stat(f"/run/netns/distrun-lab-{node}").st_ino

    def lossy(self, node, percent):
        """Drops `percent` % of what the host sends and receives; percent 0 removes the rules."""
        nft = ["nsenter", f"--net=/run/netns/distrun-lab-{node}", "nft"]
        if percent == 0:
            subprocess.run(nft + ["delete", "table", "inet", "distrun_lossy"], check=True)
            return
        rules = (f"table inet distrun_lossy {{\n"
                 f"  chain in {{ type filter hook input priority 0; numgen random mod 100 < {percent} drop; }}\n"
                 f"  chain out {{ type filter hook output priority 0; numgen random mod 100 < {percent} drop; }}\n"
                 f"}}\n")
        subprocess.run(nft + ["-f", "-"], input=rules, text=True, check=True)

    def link(self, node, state):
        subprocess.run(["nsenter", f"--net=/run/netns/distrun-lab-{node}", "ip", "link", "set", "eth0", state],
                       check=True)


def processes_with(entry):
    needle = entry.encode()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(name))
        except OSError:
            pass
    return found


def in_netns(pid, inode):
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == inode
    except OSError:
        return False


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def wait_for(predicate, timeout, interval=0.01):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class Trial:
    """One srun job of one launcher per lab host, one worker each."""

    def __init__(self, lab, launcher, distrun, victim):
        self.lab = lab
        self.victim = victim
        self.marker_value = "eb-" + uuid.uuid4().hex[:12]
        self.marker = f"DISTRUN_BENCH_MARKER={self.marker_value}"
        self.dir = os.path.join(lab.dir, "jobs", self.marker_value)
        os.makedirs(self.dir)
        worker = os.path.join(self.dir, "worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        if launcher == "distrun":
            command = [distrun, "--nnodes", "2:3", "--nproc-per-node", "1", "--", PYTHON, worker, self.dir]
        else:
            command = [PYTHON, os.path.join(HERE, "torchrun_py311.py"), "--nnodes", "2:3", "--nproc_per_node", "1",
                       "--rdzv_backend", "c10d", "--rdzv_endpoint", "node1:29400", "--rdzv_id", self.marker_value,
                       "--max_restarts", "3", worker, self.dir]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": lab.conf,
               "DISTRUN_BENCH_MARKER": self.marker_value, "DISTRUN_TOKEN": uuid.uuid4().hex}
        self.srun = subprocess.Popen(
            lab.on_login_host(["srun", "-J", self.marker_value, "-N3", "--ntasks-per-node=1", "--no-kill",
                               "--output", os.path.join(self.dir, "%t.out"), "--error",
                               os.path.join(self.dir, "%t.err"), *command]),
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def files(self, prefix):
        return [name for name in os.listdir(self.dir) if name.startswith(prefix)]

    def wait_ready(self, timeout=120):
        return wait_for(lambda: len(self.files("ready-0-")) == 3, timeout, 0.05)

    def victim_pids(self, only_distrun):
        inode = self.lab.netns_inode(self.victim)
        pids = [p for p in processes_with(self.marker) if in_netns(p, inode)]
        return [p for p in pids if comm(p) == "distrun"] if only_distrun else pids

    def distrun_running_on(self, node):
        inode = self.lab.netns_inode(node)
        return any(comm(p) == "distrun" for p in processes_with(self.marker) if in_netns(p, inode))

    def stepping(self, epoch, hosts):
        """Whether `epoch`'s workers that started on `hosts` stepped (three all-reduces: ready files)."""
        def host_of(name):
            return name.split("-", 2)[2].rsplit("-", 1)[0]
        started = {host_of(name) for name in self.files(f"start-{epoch}-")} & set(hosts)
        ready = {host_of(name) for name in self.files(f"ready-{epoch}-")}
        return bool(started) and started <= ready

    def epochs_started(self):
        return sorted({int(name.split("-")[1]) for name in self.files("start-")})

    def recovery(self, since, timeout):
        """Seconds from `since` to the latest survivor's first worker of a later epoch, or None."""
        def starts():
            found = {}
            for name in self.files("start-"):
                epoch, host, _ = name[len("start-"):].split("-", 2)
                if epoch != "0" and host != self.victim:
                    with open(os.path.join(self.dir, name)) as f:
                        text = f.read()
                    if text:
                        found[host] = min(found.get(host, float("inf")), float(text))
            return found
        if not wait_for(lambda: len(starts()) == len(NODES) - 1, timeout, 0.02):
            return None
        return max(starts().values()) - since

    def end(self, keep=False):
        open(os.path.join(self.dir, "stop"), "w").close()
        try:
            self.srun.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        subprocess.run(self.lab.on_login_host(["scancel", "--name", self.marker_value]),
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SLURM_CONF": self.lab.conf}, check=False)
        if self.srun.poll() is None:
            self.srun.kill()  # our own srun client
            self.srun.wait()
        wait_for(lambda: not processes_with(self.marker), 15, 0.1)
        self.lab.resume_drained()
        for pid in processes_with(self.marker):  # carries this trial's marker: this bench started it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if keep:
            print(f"  kept {self.dir}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_trial(lab, launcher, scenario, distrun, timeout, lossy=(30, 50), victim="node3", keep=False):
    trial = Trial(lab, launcher, distrun, victim)
    try:
        if not trial.wait_ready():
            print(f"  {launcher} {scenario}: the job did not start", file=sys.stderr)
            return None
        if scenario == "lossy":
            lab.lossy(victim, lossy[1])
            try:
                time.sleep(lossy[0])
            finally:
                lab.lossy(victim, 0)
            time.sleep(15)
            running = [n for n in NODES if trial.distrun_running_on(n)]
            epochs = trial.epochs_started()
            # The job went on when its latest epoch's workers step; a node it went on without may have left
            # (its distrun ended: fenced, or a standby that could not take over), but the job must not end.
            # Without a later epoch, the job went on only if it kept every node.
            if not running or not trial.stepping(epochs[-1], running) or (epochs == [0] and len(running) < 3):
                return f"ended (running: {', '.join(running) or 'none'}; epochs {epochs[0]}..{epochs[-1]})"
            if victim in running and epochs == [0]:
                return f"kept {victim}"
            left = [n for n in NODES if n not in running]
            return f"went on without {', '.join(left) or 'nobody'} (epochs {epochs[0]}..{epochs[-1]})"
        if scenario == "link":
            since = time.time()
            lab.link(victim, "down")
            try:
                return trial.recovery(since, timeout)
            finally:
                lab.link(victim, "up")
        pids = trial.victim_pids(only_distrun=scenario == "kill")
        since = time.time()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        return trial.recovery(since, timeout)
    finally:
        trial.end(keep)


def summary(times):
    done = sorted(t for t in times if t is not None)
    if not done:
        return {"trials": len(times), "recovered": 0}
    p99 = done[min(len(done) - 1, int(round(0.99 * (len(done) - 1))))]
    return {"trials": len(times), "recovered": len(done), "median_s": round(statistics.median(done), 3),
            "p99_s": round(p99, 3), "max_s": round(done[-1], 3), "each_s": [None if t is None else round(t, 3)
                                                                          for t in times]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--distrun", default=os.path.join(REPO, "build", "release", "distrun"))
    parser.add_argument("--lab", default=os.environ.get("DISTRUN_LAB_DIR", "/run/distrun-lab"))
    parser.add_argument("--trials", type=int, default=20, help="of distrun-kill and distrun-link")
    parser.add_argument("--torchrun-trials", type=int, default=3, help="of host-crash, for each launcher")
    parser.add_argument("--timeout", type=float, default=180, help="a trial without recovery by then fails")
    parser.add_argument("--scenarios", default="kill,link,crash", help="of kill, link, crash, lossy")
    parser.add_argument("--lossy-seconds", type=float, default=30)
    parser.add_argument("--lossy-percent", type=int, default=50)
    parser.add_argument("--keep", action="store_true", help="keep each trial's directory (its logs)")
    parser.add_argument("--victim", default="node3", choices=NODES,
                        help="the host lost (node1: node 0, the coordinator's host)")
    args = parser.parse_args()
    lab = Lab(args.lab)
    distrun = os.path.abspath(args.distrun)
    scenarios = args.scenarios.split(",")
    results = {}
    if "lossy" in scenarios:
        outcomes = []
        for i in range(args.trials):
            outcomes.append(run_trial(lab, "distrun", "lossy", distrun, args.timeout,
                                      (args.lossy_seconds, args.lossy_percent), args.victim, args.keep))
            print(f"  lossy trial {i + 1}: {outcomes[-1]}", flush=True)
        results["distrun-lossy"] = {"victim": args.victim, "trials": len(outcomes),
                                    "ended": sum(o.startswith("ended") for o in outcomes),
                                    "kept": outcomes.count(f"kept {args.victim}"), "each": outcomes}
        print(f"distrun-lossy: {json.dumps(results['distrun-lossy'])}", flush=True)
    for scenario in [s for s in ("kill", "link") if s in scenarios]:
        times = [run_trial(lab, "distrun", scenario, distrun, args.timeout, victim=args.victim)
                 for _ in range(args.trials)]
        results[f"distrun-{scenario}-{args.victim}"] = summary(times)
        print(f"distrun-{scenario}-{args.victim}: {json.dumps(results[f'distrun-{scenario}-{args.victim}'])}",
              flush=True)
    crash = {"distrun": [], "torchrun": []}
    for _ in range(args.torchrun_trials if "crash" in scenarios else 0):
        for launcher in ("distrun", "torchrun"):
            crash[launcher].append(run_trial(lab, launcher, "crash", distrun, args.timeout, victim=args.victim))
    for launcher, times in crash.items() if "crash" in scenarios else []:
        results[f"host-crash-{launcher}"] = summary(times)
        print(f"host-crash {launcher}: {json.dumps(results[f'host-crash-{launcher}'])}", flush=True)
    d, t = results.get("host-crash-distrun", {}), results.get("host-crash-torchrun", {})
    if d.get("median_s") and t.get("median_s"):
        print(f"host-crash: torchrun / distrun median = {t['median_s'] / d['median_s']:.1f}")
    print(json.dumps({"benchmark": "elastic-lab", **results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
