"""A DDP training loop that survives the loss of a node, a worker or a peer without restarting its process.

Run it under distrun with in-process recovery, e.g. an elastic job of 2 working nodes and a warm spare:

    srun --no-kill distrun --nnodes 2:3 --elastic-policy spares --recovery in-process \\
        -- python3 examples/inprocess_ddp.py --steps 500
    distrun --nproc-per-node 4 --recovery in-process --max-restarts 3 -- python3 examples/inprocess_ddp.py

When the job's world changes, the step in flight fails (its collective is released by distrun), and
distrun.torch.recover() returns the next world: the same process, perhaps another rank and world size. Every
rank then takes the model, the optimizer and the step from world.source (the same rank for all; a process
that kept its state), wraps the model in DDP again on the new group, and goes on; no step is lost beyond the
one in flight. A process that is new (a spare's worker, a worker started again) took no part before and gets
everything from the source. Without a source (every process is new) it starts afresh: load a checkpoint
there in a real job. Under `--recovery restart` the same script runs and recover() re-raises: distrun starts
every worker again.

At the end every rank prints a checksum of its parameters: all must agree.
"""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import distrun
import distrun.torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def forward(self, x):
        return self.layers(x)


def batch(step, rank, device):
    """This rank's data of `step`: the same whichever process computes it."""
    g = torch.Generator().manual_seed(step * 100003 + rank)
    x = torch.randn(32, 16, generator=g)
    return x.to(device), x.sum(dim=1, keepdim=True).to(device)


def take_state(world, model, optimizer, step):
    """Every rank takes the model, the optimizer and the step from world.source. For a large model,
    broadcast each tensor instead (or load a checkpoint): this pickles the state once per recovery."""
    if world.source is None:
        print(f"rank {world.rank}: no process kept its state; starting afresh (load a checkpoint here)", flush=True)
        return 0
    box = [{"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
           if world.rank == world.source else None]
    dist.broadcast_object_list(box, src=world.source)
    model.load_state_dict(box[0]["model"])
    optimizer.load_state_dict(box[0]["optimizer"])
    return box[0]["step"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backend", default=None, help="gloo or nccl (default: nccl on GPUs, else gloo)")
    parser.add_argument("--step-seconds", type=float, default=0.0, help="a pause after each step")
    args = parser.parse_args()

    world = distrun.torch.init_process_group(args.backend)  # a spare's worker waits here for a seat
    device = torch.device("cpu")
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", int(os.environ.get("DISTRUN_LOCAL_DEVICE_IDS", "0").split(",")[0] or 0))
        torch.cuda.set_device(device)
    torch.manual_seed(0)  # the same initial model everywhere (DDP broadcasts rank 0's anyway)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    step = 0
    if world.new and world.generation > 0:  # a spare's worker, or one started again: it holds nothing yet
        step = take_state(world, model, optimizer, step)
    ddp = DDP(model)
    while step < args.steps:
        try:
            x, y = batch(step, world.rank, device)
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            optimizer.zero_grad()
            loss.backward()  # the gradients' all-reduce: where a lost peer shows
            optimizer.step()
            step += 1
            distrun.progress(step)  # distrun's hang watch, and the recovery's first step in its log
            if world.rank == 0 and step % 50 == 0:
                print(f"generation {world.generation} step {step} loss {loss.item():.4f}", flush=True)
            if args.step_seconds:
                import time
                time.sleep(args.step_seconds)
        except Exception as error:
            world = distrun.torch.recover(error)  # re-raises anything that is not a change of the world
            print(f"rank {world.rank}/{world.world_size}: generation {world.generation} "
                  f"(new {world.new}, state from rank {world.source}, lost ranks {world.lost})", flush=True)
            step = take_state(world, model, optimizer, step)
            ddp = DDP(model)  # the new default group
    checksum = sum(p.detach().double().sum().item() for p in model.parameters())
    print(f"rank {world.rank} pid {os.getpid()} generation {world.generation} step {step} checksum {checksum:.10f}",
          flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
