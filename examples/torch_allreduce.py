"""Every worker contributes rank + 1 to an all-reduce; all must see the same, correct sum.

Run it under distrun: `distrun --nproc-per-node 4 -- python3 examples/torch_allreduce.py` (gloo, on CPUs),
or on GPUs `distrun -- python3 examples/torch_allreduce.py nccl` (one worker per GPU).
init_process_group() takes no address, rank or size: distrun's MASTER_ADDR, MASTER_PORT, RANK and
WORLD_SIZE are all it needs. With NCCL each worker uses the GPU distrun gave it: device 0 of its own
CUDA_VISIBLE_DEVICES, or the first of DISTRUN_LOCAL_DEVICE_IDS when devices are not narrowed.
"""
import os
import sys

import torch
import torch.distributed as dist


def main():
    backend = sys.argv[1] if len(sys.argv) > 1 else "gloo"
    if backend not in ("gloo", "nccl"):
        print(f"torch_allreduce.py: unknown backend '{backend}'; use gloo or nccl", file=sys.stderr)
        return 2
    device = torch.device("cpu")
    if backend == "nccl":
        if not torch.cuda.is_available():
            print("torch_allreduce.py: nccl needs a GPU and this worker sees none "
                  f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')})", file=sys.stderr)
            return 1
        local = os.environ.get("DISTRUN_LOCAL_DEVICE_IDS", "0").split(",")[0] or "0"
        device = torch.device("cuda", int(local))
        torch.cuda.set_device(device)
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["DISTRUN_PROCESS_ID"]), "torch and distrun disagree on the rank"
    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value, op=dist.ReduceOp.SUM)
    expected = world * (world + 1) / 2
    ok = value.item() == expected
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"rank {rank}/{world} local {os.environ['LOCAL_RANK']} ({backend}, {where}) on "
          f"{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}: all_reduce sum = {value.item():g} "
          f"(expected {expected:g}) {'OK' if ok else 'WRONG'}", flush=True)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
