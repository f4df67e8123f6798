#!/usr/bin/env python3
"""Recovering in place with NCCL on one GPU (bench/gpu_checks.sh, step inprocess-nccl): three distrun nodes
on this machine, one worker each on GPU 0 (NCCL told they are three hosts: distinct NCCL_HOSTID, no P2P, no
shared memory), node 2 a warm spare (--nnodes 2:3 --elastic-policy spares --recovery in-process). Mid
training node 1's distrun is SIGKILLed (its worker dies in the middle of an all-reduce); rank 0's
communicator is aborted from distrun.torch's thread, the group destroyed and formed again with the spare's
worker as rank 1, which takes the state from rank 0. Passes when both survivors finish, rank 0 kept its
process, and every rank's state agrees at every step.

    python3 bench/gpu_inprocess_nccl.py BUILD_DIR/distrun
"""
import collections
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(REPO, "tests", "integration", "inprocess_worker.py")


def main():
    distrun = sys.argv[1]
    out = tempfile.mkdtemp(prefix="inprocess-nccl-")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    nodes = []
    for rank in range(3):
        env = dict(os.environ, OUT=out, STEPS="300", STEP_SECONDS="0.01", BACKEND="nccl", NCCL_HOSTID=f"node{rank}",
                   NCCL_P2P_DISABLE="1", NCCL_SHM_DISABLE="1", CUDA_VISIBLE_DEVICES="0",
                   PYTHONPATH=os.path.join(REPO, "python") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        nodes.append(subprocess.Popen(
            [distrun, "--num-nodes", "3", "--node-rank", str(rank), "--coordinator-address", f"127.0.0.1:{port}",
             "--nproc-per-node", "1", "--device-binding", "none", "--nnodes", "2:3", "--elastic-policy", "spares",
             "--recovery", "in-process", "--heartbeat-timeout", "2", "--", sys.executable, WORKER],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    log = os.path.join(out, "log")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not os.path.exists(log) or len(open(log).readlines()) < 40):
        time.sleep(0.1)
    nodes[1].kill()
    results = [p.communicate(timeout=180) for p in (nodes[0], nodes[2])]
    codes = [nodes[0].returncode, nodes[2].returncode]
    for (o, e), code in zip(results, codes):
        print(f"-- exit {code}\n{e[-3000:]}")
    rows = [line.split() for line in open(log)]
    sums = collections.defaultdict(set)
    for w in rows:
        sums[(w[1], w[3])].add(w[9])
    disagree = {k: v for k, v in sums.items() if len(v) > 1}
    pids0 = {w[7] for w in rows if w[5] == "0"}
    gens = sorted({int(w[1]) for w in rows})
    print(f"generations {gens}; rank 0's processes {pids0}; steps {max(int(w[3]) for w in rows)}; disagreements {disagree}")
    ok = codes == [0, 0] and not disagree and len(pids0) == 1 and gens == [0, 1]
    print("inprocess-nccl:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
