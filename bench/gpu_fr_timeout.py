"""A rank whose second all_reduce cannot finish within its NCCL timeout (the GPU is held by a sleeping
kernel), for bench/gpu_checks.sh: with the Flight Recorder variables distrun sets, torch's watchdog dumps the
recorder on the timeout into the file distrun names (TORCH_FR_DUMP_TEMP_FILE + rank), then ends the rank."""
import datetime
import os

import torch
import torch.distributed as dist

device = torch.device("cuda", int(os.environ.get("DISTRUN_LOCAL_DEVICE_IDS", "0").split(",")[0] or 0))
torch.cuda.set_device(device)
dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=5), device_id=device)
x = torch.ones(1, device=device)
dist.all_reduce(x)
torch.cuda.synchronize()
print("first all_reduce done; holding the GPU for ~60 s", flush=True)
torch.cuda._sleep(int(60 * 2e9))  # GPU cycles at ~2 GHz: the next collective waits behind it
dist.all_reduce(x)
torch.cuda.synchronize()
print("the second all_reduce finished: no timeout happened", flush=True)
