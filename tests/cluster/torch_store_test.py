"""PyTorch's store served by node 0's distrun (--torch-store distrun, the default) across the lab's hosts:
torch 1.13 gloo workers on three hosts, a restart round that re-initialises from a fresh keyspace, and a
stranger on the login host (not a host of the job) that can neither read, write nor hold the store."""
import os
import subprocess

from cluster_harness import DISTRUN, NODES, PYTHON, REPO, JobRuntimeCase, main, on_login_host

STORE_WORKER = os.path.join(REPO, "tests", "integration", "torch_store_worker.py")

# Run on labctl: connects to the job's store as torch 1.13's client would and tries to overwrite, read and
# hold it. Prints what happened to each connection: "closed" (by the store, before any answer) or what came.
STRANGER = r"""
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
def conn():
    return socket.create_connection((host, port), timeout=15)
def outcome(s):
    try:
        data = s.recv(64)
        return "closed" if data == b"" else "answered " + data.hex()
    except ConnectionResetError:
        return "closed"
    except socket.timeout:
        return "open"
def blob(b):
    return len(b).to_bytes(8, "little") + b
key = b"/worker/attempt_0/guard"
s = conn(); s.sendall(bytes([0]) + blob(key) + blob(b"stranger"))  # SET
print("set", outcome(s), flush=True)
s = conn(); s.sendall(bytes([2]) + blob(key))                      # GET
print("get", outcome(s), flush=True)
s = conn()                                                         # says nothing: held?
start = time.time(); print("silent", outcome(s), round(time.time() - start), flush=True)
"""

# On the job's hosts: rank 0 writes a key, every rank waits until the stranger is done, then reads it back.
GUARDED_WORKER = r"""
import datetime, os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank = dist.get_rank()
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
raw = dist.TCPStore(addr, port, dist.get_world_size(), False, datetime.timedelta(seconds=60))
if rank == 0:
    raw.set("/worker/attempt_0/guard", "job")
    with open(os.path.join(sys.argv[1], "store"), "w") as f:
        f.write(f"{addr} {port}\n")
dist.barrier()
# Each torch 1.13 client's silent second connection must outlive the store's hello timeout (10 s), or its
# thread spins on the closed socket: 16 s of waiting would then cost seconds of CPU time.
cpu, start = time.process_time(), time.time()
while not os.path.exists(os.path.join(sys.argv[1], "stranger-done")) or time.time() - start < 16:
    time.sleep(0.1)
cpu = time.process_time() - cpu
print(f"rank={rank} guard={raw.get('/worker/attempt_0/guard').decode()} waiting_cpu={cpu:.2f}", flush=True)
dist.barrier()
dist.destroy_process_group()
"""


def reports(stdout):
    out = []
    for line in stdout.splitlines():
        if "rank=" in line:
            out.append(dict(w.split("=", 1) for w in line.split("] ", 1)[-1].split()))
    return out


class TorchStore(JobRuntimeCase):
    def test_six_workers_on_three_hosts_and_a_restart_round(self):
        r = self.srun([f"-N{len(NODES)}", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", "2",
                       "--max-restarts", "1", "--", PYTHON, STORE_WORKER],
                      env=self.env(FAIL_RANK="3"), timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        got = reports(r.stdout)
        world = 2 * len(NODES)
        epoch1 = [g for g in got if g["epoch"] == "1"]
        self.assertEqual(sorted(int(g["rank"]) for g in epoch1), list(range(world)), r.stdout)
        for g in got:
            self.assertEqual(g["sum"], str(world * (world + 1) // 2), g)
            self.assertEqual(g["agent_store"], "True", g)
            # Node 0's runtime port, on node1: the same store in both epochs, bound by distrun there and by
            # nothing on the other hosts (their /proc/net shows their own network only).
            self.assertEqual(g["store"], got[0]["coordinator"], g)
            self.assertTrue(g["store"].startswith("node1:"), g)
            self.assertIn(g["owner"], ("other", "nobody"), g)
        for g in epoch1:
            self.assertEqual(g["stale"], "False", g)  # epoch 0's key is gone
        self.assertIn("restarting all workers (restart 1 of 1", r.stderr)

    def test_a_stranger_cannot_read_write_or_hold_the_store(self):
        worker = self.path("guarded.py")
        with open(worker, "w") as f:
            f.write(GUARDED_WORKER)
        job = self.srun_popen([f"-N{len(NODES)}", "--ntasks-per-node=1", DISTRUN, "--nproc-per-node", "2",
                               "--", PYTHON, worker, self.dir])
        self.wait_for_files(["store"], timeout=120, proc=job)
        with open(self.path("store")) as f:
            host, port = f.read().split()
        stranger = subprocess.run(on_login_host([PYTHON, "-c", STRANGER, host, port]), capture_output=True,
                                  text=True, timeout=60)
        with open(self.path("stranger-done"), "w") as f:
            f.write("done\n")
        out, err = job.communicate(timeout=120)
        self.assertEqual(job.returncode, 0, out + err)
        lines = stranger.stdout.splitlines()
        self.assertEqual(lines[:2], ["set closed", "get closed"], stranger.stdout + stranger.stderr)
        # A silent connection from a stranger is closed after the hello timeout (10 s), not held.
        silent = lines[2].split()
        self.assertEqual(silent[:2], ["silent", "closed"], stranger.stdout)
        self.assertLessEqual(int(silent[2]), 12, stranger.stdout)
        # The job's key is what rank 0 wrote, on every rank.
        guards = reports(out)
        self.assertEqual(len(guards), 2 * len(NODES), out)
        self.assertEqual({g["guard"] for g in guards}, {"job"}, out)
        for g in guards:
            self.assertLess(float(g["waiting_cpu"]), 1.0, out)  # no worker spun while it waited
        refusals = [l for l in err.splitlines() if "refused a TCPStore connection from 10.99.0.1:" in l]
        self.assertGreaterEqual(len(refusals), 2, err)
        self.assertIn("serves only this host and the hosts of this job's agents", refusals[0])


if __name__ == "__main__":
    main()
