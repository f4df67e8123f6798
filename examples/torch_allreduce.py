"""Every worker contributes rank + 1 to an all-reduce; all must see the same, correct sum.

Run it under distrun: `distrun --nproc-per-node 4 -- python3 examples/torch_allreduce.py`.
init_process_group("gloo") takes no arguments: distrun's MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE
are all it needs.
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["DISTRUN_PROCESS_ID"]), "torch and distrun disagree on the rank"
    value = torch.tensor([float(rank + 1)])
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    ok = value.item() == expected
    print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} on {os.environ['MASTER_ADDR']}:"
          f"{os.environ['MASTER_PORT']}: all_reduce sum = {value.item():g} (expected {expected:g}) "
          f"{'OK' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
