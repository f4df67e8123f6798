"""A torch worker that checks where its store lives: init_process_group("env://") with gloo, an all_reduce,
then facts about MASTER_PORT and the store, printed as one line of key=value words for the test to read.

- owner: who listens on MASTER_PORT, seen from this worker: "me" (a socket of this process: torch's own
  server in rank 0), "other" (another process: distrun) or "nobody".
- stale: whether a key that the previous epoch wrote outside torch's prefixes is still in the store.
- Epoch 0 with FAIL_RANK set: that rank exits 3 after the all_reduce (a restart round follows).
- STORE_WORKER_BACKEND=nccl (on a GPU machine): NCCL on the GPU distrun gave the worker instead of gloo, and
  fr_entries: how many collectives the Flight Recorder holds (distrun sets its buffer size), or "none" where
  this torch cannot say.
"""
import datetime
import os
import sys

import torch
import torch.distributed as dist


def listening_inodes(port):
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def my_socket_inodes():
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            mine.add(target[len("socket:["):-1])
    return mine


def flight_recorder_entries():
    """The collectives in this rank's Flight Recorder, read as torch's own dump reads them."""
    try:
        import pickle
        dump = torch._C._distributed_c10d._dump_nccl_trace()
        return len(pickle.loads(dump).get("entries", []))
    except Exception:  # a release without the recorder, or another name for its dump
        return "none"


def main():
    epoch = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    backend = os.environ.get("STORE_WORKER_BACKEND", "gloo")
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", int(os.environ.get("DISTRUN_LOCAL_DEVICE_IDS", "0").split(",")[0] or 0))
        torch.cuda.set_device(device)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()
    value = torch.tensor([float(rank + 1)], device=device)
    dist.all_reduce(value)
    fr_entries = flight_recorder_entries() if backend == "nccl" else "none"
    port = int(os.environ["MASTER_PORT"])
    listeners = listening_inodes(port)
    owner = "nobody" if not listeners else "me" if listeners & my_socket_inodes() else "other"
    # A raw client of the same store: keys without the prefixes init_process_group adds.
    raw = dist.TCPStore(os.environ["MASTER_ADDR"], port, world, False, datetime.timedelta(seconds=30))
    # torch 1.13's Python has no check(): a COMPARE_SET with a made-up expected value stores nothing and
    # answers the value the key holds, or that expected value when the key is missing.
    stale = epoch > 0 and raw.compare_set(f"left-by-epoch-{epoch - 1}", "missing", "-") != b"missing"
    if rank == 0:
        raw.set(f"left-by-epoch-{epoch}", "x")
    dist.barrier()
    print(f"rank={rank} world={world} epoch={epoch} sum={value.item():g} owner={owner} stale={stale} "
          f"agent_store={os.environ.get('TORCHELASTIC_USE_AGENT_STORE', 'unset')} "
          f"coordinator={os.environ.get('DISTRUN_COORDINATOR_ADDRESS', '')} "
          f"store={os.environ['MASTER_ADDR']}:{port} backend={backend} torch={torch.__version__} "
          f"fr_entries={fr_entries}", flush=True)
    if epoch == 0 and os.environ.get("FAIL_RANK") == str(rank):
        sys.exit(3)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
