"""torchrun's multi-node command lines on the lab's hosts, with the word `torchrun` replaced by `distrun`, the
same command on every host (static: but --node_rank; c10d: word for word), run on the hosts themselves (no
Slurm): the real torchrun (Debian's torch 1.13, bench/torchrun_py311.py) and distrun give every worker the
same world, torch's gloo all-reduces across the hosts, and an elastic job (--nnodes MIN:MAX) goes on when a
host's distrun is killed."""
import json
import os
import signal
import subprocess
import time

from cluster_harness import DISTRUN, NODES, PYTHON, REPO, ClusterCase, main, on_node, wait_for

TORCHRUN = [PYTHON, os.path.join(REPO, "bench", "torchrun_py311.py")]
# torch's worker contract; the host of rank 0's node and the port are compared where the command names them.
CONTRACT = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
            "OMP_NUM_THREADS"]

WORKER = r"""
import json, os, socket, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
env = {n: os.environ.get(n) for n in %r + ["MASTER_ADDR", "MASTER_PORT"]}
# One write per line: torchrun leaves its workers' output untagged, and print's newline would be a second one.
sys.stdout.write("REPORT " + json.dumps({"env": env, "host": socket.gethostname(), "sum": int(t.item()),
                                         "argv": sys.argv[1:]}) + "\n")
sys.stdout.flush()
dist.destroy_process_group()
""" % (CONTRACT,)

# An elastic job's worker: says it runs in this epoch, then waits for `go` (or for a stop).
ELASTIC = r"""
import os, socket, time
out = os.environ["OUT"]
epoch = os.environ.get("DISTRUN_EPOCH", "0")
open(os.path.join(out, "ready-%s-%s" % (socket.gethostname(), epoch)), "w").close()
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.1)
"""


def reports(text):
    return [json.loads(line.split("REPORT ", 1)[1]) for line in text.splitlines() if "REPORT " in line]


class TorchrunAcrossHosts(ClusterCase):
    def setUp(self):
        super().setUp()
        for name, text in (("worker.py", WORKER), ("elastic.py", ELASTIC)):
            with open(self.path(name), "w") as f:
                f.write(text)

    def host_env(self, **extra):
        # What a user's shell on the host has: no batch system, this test's marker, a token all hosts share.
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.dir, self.marker_name: self.marker_value,
               "DISTRUN_TOKEN": self.marker_value, "LANG": "C.UTF-8", "OUT": self.dir}
        env.update(extra)
        return env

    def on(self, node, command):
        """`command` on the host `node`, in this test's directory (entering the host's namespaces starts at /)."""
        return on_node(node, ["env", "-C", self.dir, *command])

    def on_hosts(self, launcher, args):
        """The command on every host at once (`{node}`: the host's index); its reports and outputs."""
        procs = []
        for i, node in enumerate(NODES):
            p = subprocess.Popen(self.on(node, [*launcher, *[a.replace("{node}", str(i)) for a in args]]),
                                 cwd=self.dir, env=self.host_env(), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            procs.append(p)
        got, said = [], ""
        for node, p in zip(NODES, procs):
            out, err = p.communicate(timeout=240)
            said += f"-- {node} ({p.returncode}):\n{out}{err}"
            self.assertEqual(p.returncode, 0, said)
            got += reports(out)
        return got, said

    def same_world(self, args, compare_master=False):
        torchrun, t_said = self.on_hosts(TORCHRUN, args)
        distrun, d_said = self.on_hosts([DISTRUN], args)
        n = len(NODES) * 2
        self.assertEqual(sorted(int(r["env"]["RANK"]) for r in distrun), list(range(n)), d_said)
        names = CONTRACT + (["MASTER_ADDR", "MASTER_PORT"] if compare_master else [])
        # Which host gets which node rank may differ (c10d: the order the hosts came in); the worlds may not.
        world = lambda rows: sorted(json.dumps({k: r["env"][k] for k in names}, sort_keys=True) for r in rows)
        self.assertEqual(world(distrun), world(torchrun), t_said + d_said)
        for rows, said in ((torchrun, t_said), (distrun, d_said)):
            self.assertEqual({r["sum"] for r in rows}, {n * (n + 1) // 2}, said)  # gloo across the hosts
            # A node's workers are on one host, and its ranks follow each other.
            by_group = {}
            for r in rows:
                by_group.setdefault(r["env"]["GROUP_RANK"], set()).add(r["host"])
            self.assertTrue(all(len(hosts) == 1 for hosts in by_group.values()), said)
        return distrun

    def test_static_rendezvous_the_same_command_but_the_node_rank(self):
        self.same_world([f"--nnodes={len(NODES)}", "--nproc_per_node=2", "--node_rank={node}",
                         f"--master_addr={NODES[0]}", "--master_port=29500", "worker.py", "--lr", "1"],
                        compare_master=True)

    def test_c10d_rendezvous_word_for_word_on_every_host(self):
        distrun = self.same_world([f"--nnodes={len(NODES)}", "--nproc_per_node=2", "--rdzv_backend=c10d",
                                   f"--rdzv_endpoint={NODES[0]}:29400", f"--rdzv_id={self.marker_value}",
                                   "worker.py"])
        # The host that owns the endpoint's address serves the job: node 0, ranks 0 and 1.
        self.assertEqual({r["host"] for r in distrun if r["env"]["GROUP_RANK"] == "0"}, {NODES[0]})
        self.assertEqual({r["env"]["MASTER_ADDR"] for r in distrun}, {NODES[0]})

    def test_elastic_c10d_goes_on_when_a_hosts_distrun_is_killed(self):
        # Two hosts start the job (MIN); the third arrives and waits. A working host's distrun is killed: the
        # job goes on with the other and the one that waited, in epoch 1; then every worker ends.
        args = [f"--nnodes=2:{len(NODES)}", "--nproc_per_node=1", "--max_restarts=3", "--rdzv_backend=c10d",
                f"--rdzv_endpoint={NODES[0]}:29400", f"--rdzv_id={self.marker_value}", "elastic.py"]
        procs = {}
        for node in NODES:
            p = subprocess.Popen(self.on(node, [DISTRUN, *args]), cwd=self.dir, env=self.host_env(),
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self.procs.append(p)
            procs[node] = p
            time.sleep(0.5)  # the first two come first
        ready = lambda epoch: sorted(f.split("-", 1)[1].rsplit("-", 1)[0] for f in os.listdir(self.dir)
                                     if f.startswith("ready-") and f.endswith(f"-{epoch}"))
        self.assertTrue(wait_for(lambda: len(ready(0)) == 2, timeout=60), self.said(procs))
        victim = [n for n in ready(0) if n != NODES[0]][0]
        waiting = [n for n in NODES if n not in ready(0)][0]
        distrun_pid = self.distrun_on(victim)
        os.kill(distrun_pid, signal.SIGKILL)
        self.assertTrue(wait_for(lambda: sorted(ready(1)) == sorted([NODES[0], waiting]), timeout=60),
                        self.said(procs))
        open(self.path("go"), "w").close()
        for node in (NODES[0], waiting):
            procs[node].wait(timeout=60)
            self.assertEqual(procs[node].returncode, 0, self.said(procs))

    def distrun_on(self, node):
        """The pid of the distrun this test started on `node`."""
        pids = subprocess.run(["ip", "netns", "pids", f"distrun-lab-{node}"], capture_output=True, text=True)
        for pid in pids.stdout.split():
            try:
                if os.readlink(f"/proc/{pid}/exe") != os.path.realpath(DISTRUN):
                    continue
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if self.marker.encode() in f.read().split(b"\0"):
                        return int(pid)
            except OSError:
                continue
        raise AssertionError(f"no distrun of this test on {node}")

    def said(self, procs):
        out = ""
        for node, p in procs.items():
            if p.poll() is None:
                continue
            o, e = p.communicate()
            out += f"-- {node} ({p.returncode}):\n{o}{e}"
        return out + f"\nfiles: {sorted(os.listdir(self.dir))}"


if __name__ == "__main__":
    main()
