"""A training loop that recovers in place (distrun.torch, gloo), for the tests of --recovery in-process.

Its state is a vector and a step count. Each step all-reduces a vector made from the step and the world, adds
it to the state, and appends a line to $OUT/log: "gen G step S rank R pid P sum C new N". Every rank's state
is the same after every step (the sums must agree); after a recovery every rank takes the state and the step
from world.source, so no step is lost beyond the one in flight.

Variables: STEPS (the last step), STEP_SECONDS (a pause after each step, for the test to act in), BACKEND
(gloo, the default, or nccl: the state on this worker's first GPU; bench/gpu_inprocess_nccl.py), and
faults, each "RANK:STEP" in generation 0: FAIL_AT (exit 3), HANG_AT (never call recover: sleep forever
after the next failure), FREEZE_AT (SIGSTOP this process). SLOW_SPARE_NODE=N: the worker of node N (a spare)
is still starting when the job's first change comes: it appends its pid to $OUT/starts and waits until
`$DISTRUN status` shows epoch 1 before it calls init_process_group()."""
import os
import re
import signal
import subprocess
import sys
import time

import torch
import torch.distributed as dist

import distrun
import distrun.torch as dt

STEPS = int(os.environ.get("STEPS", "40"))
BACKEND = os.environ.get("BACKEND", "gloo")
DEVICE = torch.device("cuda", 0) if BACKEND == "nccl" else torch.device("cpu")
PAUSE = float(os.environ.get("STEP_SECONDS", "0.05"))
OUT = os.environ["OUT"]


def at(name, world, step):
    spec = os.environ.get(name)
    if not spec or world.generation != 0:
        return False
    rank, fault_step = spec.split(":")
    return int(rank) == world.rank and int(fault_step) == step


def log(world, step, state):
    with open(os.path.join(OUT, "log"), "a") as f:
        f.write(f"gen {world.generation} step {step} rank {world.rank} pid {os.getpid()} "
                f"sum {state.sum().item():.1f} new {int(world.new)} world {world.world_size}\n")


def sync(world, state, step):
    """Every rank takes the state and the step from world.source (none: start afresh)."""
    box = torch.tensor([float(step)], device=DEVICE)
    if world.source is None:
        return torch.zeros_like(state), 0
    dist.broadcast(state, src=world.source)
    dist.broadcast(box, src=world.source)
    return state, int(box.item())




def start_slowly():
    with open(os.path.join(OUT, "starts"), "a") as f:
        f.write(f"{os.getpid()}\n")
    while True:
        r = subprocess.run([os.environ["DISTRUN"], "status"], capture_output=True, text=True)
        if re.search(r"(?m)^job \S+, epoch [1-9]", r.stdout):
            break
        time.sleep(0.2)
    time.sleep(0.5)  # the change has reached every node by now, the spare's included


if BACKEND == "nccl":
    torch.cuda.set_device(DEVICE)
if "SLOW_SPARE_NODE" in os.environ and os.environ["SLOW_SPARE_NODE"] == os.environ.get("NODE"):
    start_slowly()
world = dt.init_process_group(BACKEND)
state = torch.zeros(1000, device=DEVICE)
step = 0
if world.new and world.generation > 0:
    state, step = sync(world, state, step)
hang_after_failure = False
while step < STEPS:
    try:
        if at("FAIL_AT", world, step):
            sys.exit(3)
        if at("FREEZE_AT", world, step):
            os.kill(os.getpid(), signal.SIGSTOP)
        if at("HANG_AT", world, step):
            hang_after_failure = True
        update = torch.full((1000,), float(step + 1), device=DEVICE)
        dist.all_reduce(update)
        state += update / world.world_size
        step += 1
        distrun.progress(step)  # the hang watch's, and a recovery's first step
        log(world, step, state)
        time.sleep(PAUSE)
    except Exception as error:  # a peer was lost mid-step: the step in flight is done again
        if hang_after_failure:
            time.sleep(3600)
        world = dt.recover(error)
        state, step = sync(world, state, step)
dist.destroy_process_group()
