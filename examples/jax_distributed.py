"""JAX under distrun: every process joins one JAX job, then they all-gather their process ids.

    distrun -- python3 examples/jax_distributed.py

jax.distributed.initialize() needs no arguments under distrun, in every launch mode: distrun's
sitecustomize registers distrun's cluster first in JAX's detection order (python/distrun/jax.py), which reads
the coordinator distrun chose for JAX's service (JAX_COORDINATOR_ADDRESS), the process count and id
(DISTRUN_NUM_PROCESSES, DISTRUN_PROCESS_ID), and leaves the local devices to CUDA_VISIBLE_DEVICES, which
distrun narrowed (or to JAX_LOCAL_DEVICE_IDS with --device-binding none). Run with `python -S` or `-I`
(no sitecustomize), `import distrun.jax` first.
"""
import os
import sys

import jax
import numpy as np
from jax.experimental import multihost_utils


def main():
    if not os.environ.get("DISTRUN_LOCAL_DEVICE_IDS"):
        # No GPU for this worker: JAX runs on the CPU, whose cross-process collectives need gloo.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize()

    ids = multihost_utils.process_allgather(np.array([jax.process_index()]))
    ok = sorted(ids.ravel().tolist()) == list(range(jax.process_count()))
    print(f"process {jax.process_index()}/{jax.process_count()}: {jax.local_device_count()} local of "
          f"{jax.device_count()} devices ({jax.default_backend()}); all-gathered ids {ids.ravel().tolist()} "
          f"{'OK' if ok else 'WRONG'}", flush=True)
    jax.distributed.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
