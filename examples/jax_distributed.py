"""JAX under distrun: every process joins one JAX job, then they all-gather their process ids.

    distrun -- python3 examples/jax_distributed.py

jax.distributed.initialize() reads JAX_COORDINATOR_ADDRESS (JAX's service, in worker 0, on the port
distrun chose) and JAX_LOCAL_DEVICE_IDS (set with --device-binding none) by itself. JAX has no variable
for the process count and id, so they come from distrun's. Naming the local devices too (from
DISTRUN_LOCAL_DEVICE_IDS, which counts within the worker's CUDA_VISIBLE_DEVICES) keeps JAX's own
launcher detection, which would read Slurm's or Open MPI's task variables, from overriding distrun's plan.
"""
import os
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils


def main():
    local = os.environ.get("DISTRUN_LOCAL_DEVICE_IDS", "")
    if not local:
        # No GPU for this worker: JAX runs on the CPU, whose cross-process collectives need gloo.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        num_processes=int(os.environ["DISTRUN_NUM_PROCESSES"]),
        process_id=int(os.environ["DISTRUN_PROCESS_ID"]),
        local_device_ids=[int(i) for i in local.split(",")] if local else None)

    ids = multihost_utils.process_allgather(np.array([jax.process_index()]))
    ok = sorted(ids.ravel().tolist()) == list(range(jax.process_count()))
    print(f"process {jax.process_index()}/{jax.process_count()}: {jax.local_device_count()} local of "
          f"{jax.device_count()} devices ({jax.default_backend()}); all-gathered ids {ids.ravel().tolist()} "
          f"{'OK' if ok else 'WRONG'}", flush=True)
    jax.distributed.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
