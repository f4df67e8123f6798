"""What the real JAX makes of a distrun worker with no arguments to jax.distributed.initialize(): the order
of its cluster environments (distrun's first), the world it joined, its local devices, and an all-gather
of process ids across that world. For bench/gpu_checks.sh (JAX 0.11 on the GPU machine); it also runs with
the stand-in JAX of tests/frameworks, which has no collectives (the all-gather is then skipped).

    distrun --nproc-per-node 2 -- python3 bench/gpu_jax_world.py [cpu]
"""
import os
import sys

import jax
from jax._src import clusters, distributed


def main():
    if "cpu" in sys.argv[1:]:
        jax.config.update("jax_platforms", "cpu")
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    order = [c.__name__ for c in clusters.ClusterEnv._cluster_types]
    jax.distributed.initialize()
    state = distributed.global_state
    rank, world = jax.process_index(), jax.process_count()
    plan = (int(os.environ["DISTRUN_PROCESS_ID"]), int(os.environ["DISTRUN_NUM_PROCESSES"]))
    gathered = "skipped"
    try:
        import numpy as np
        from jax.experimental import multihost_utils
        ids = multihost_utils.process_allgather(np.array([rank])).ravel().tolist()
        gathered = "OK" if sorted(ids) == list(range(world)) else "WRONG %s" % ids
    except ImportError:
        pass
    ok = (rank, world) == plan and not gathered.startswith("WRONG")
    print("jax %s: process %d/%d (plan %d/%d) at %s, %d local device(s) of %d (%s); clusters %s; all-gather %s; %s"
          % (jax.__version__, rank, world, plan[0], plan[1], state.coordinator_address,
             jax.local_device_count() if hasattr(jax, "local_device_count") else -1,
             jax.device_count() if hasattr(jax, "device_count") else -1,
             jax.default_backend() if hasattr(jax, "default_backend") else "?", order[:3], gathered,
             "OK" if ok else "WRONG"), flush=True)
    jax.distributed.shutdown()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
