"""An elastic job's worker: a training loop of all-reduces that checks every sum against the world of its
epoch, and resumes from its checkpoint when distrun starts it again in a later epoch.

    srun --no-kill distrun --nnodes 2:3 -- python3 examples/elastic_allreduce.py --checkpoint /shared/ckpt

Each epoch runs it afresh with that epoch's RANK, WORLD_SIZE and DISTRUN_EPOCH; init_process_group() needs
no arguments. Rank 0 writes the step it finished to the checkpoint file (on a file system every node sees),
so a new epoch goes on from there. At the end every worker prints one line: its epoch, rank, world, host and
the steps it ran, all with the right sum. With `--job-key NAME`, rank 0 of the first epoch stores where the
job began under `job/NAME` in the job's key-value store (`distrun kv`), and rank 0 of every epoch prints it
at the end: keys under `job/` outlive epochs, even the loss of node 0. With `distrun --change-signal USR1`, a worker told that the world
changes at the next epoch (a node arrived) says so; a real script would save its state there.
"""
import argparse
import os
import signal
import socket
import subprocess
import sys
import time

# First of all, so that a notice never finds the worker without its handler (USR1 would end it).
ME = f"epoch {os.environ.get('DISTRUN_EPOCH')} rank {os.environ.get('RANK')}/{os.environ.get('WORLD_SIZE')}"
signal.signal(signal.SIGUSR1, lambda *_: print(f"{ME}: told that the world changes", flush=True))

import torch  # noqa: E402 (after the handler)
import torch.distributed as dist  # noqa: E402


def read_checkpoint(path):
    try:
        with open(path) as f:
            return int(f.read() or 0)
    except FileNotFoundError:
        return 0


def write_checkpoint(path, step):
    with open(path + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(path + ".tmp", path)  # a reader never sees half a number


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--checkpoint", required=True, help="file holding the last finished step")
    parser.add_argument("--steps", type=int, default=60, help="steps of the whole training")
    parser.add_argument("--step-time", type=float, default=0.1, help="seconds of 'work' per step")
    parser.add_argument("--job-key", help="a key under job/ that rank 0 of epoch 0 sets and every rank 0 reads")
    args = parser.parse_args()
    distrun = os.environ.get("DISTRUN_PROGRAM", "distrun")

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    epoch = int(os.environ["DISTRUN_EPOCH"])
    # Every rank starts where rank 0's checkpoint says; the all-reduce of the step makes sure they agree.
    start = torch.tensor([read_checkpoint(args.checkpoint)], dtype=torch.int64)
    dist.broadcast(start, src=0)
    first = int(start.item())
    step = first
    key = f"job/{args.job_key}" if args.job_key else None
    if key and rank == 0 and epoch == 0:
        subprocess.run([distrun, "kv", "set", key, f"begun in epoch 0 on {socket.gethostname()}"], check=True)
    while step < args.steps:
        value = torch.tensor([float(rank + 1)])
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        if value.item() != world * (world + 1) / 2:
            print(f"epoch {epoch} rank {rank}/{world}: step {step} sum {value.item():g}, expected "
                  f"{world * (world + 1) / 2:g}", file=sys.stderr, flush=True)
            return 1
        step += 1
        if rank == 0:
            write_checkpoint(args.checkpoint, step)
        time.sleep(args.step_time)
    print(f"epoch {epoch} rank {rank}/{world} node {os.environ['GROUP_RANK']}/{os.environ['GROUP_WORLD_SIZE']} "
          f"on {socket.gethostname()}: steps {first}..{step} sums OK", flush=True)
    if key and rank == 0:
        value = subprocess.run([distrun, "kv", "try-get", key], capture_output=True, text=True).stdout.strip()
        print(f"epoch {epoch} {key}: {value or '(none)'}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
