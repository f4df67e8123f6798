"""JAX finds distrun's world: `jax.distributed.initialize()` with no arguments joins the job distrun planned.

JAX fills the arguments of `initialize()` that are not given from the first "cluster environment" of its
detection order whose environment is present (Open MPI, Slurm, TPU, Kubernetes...). Inside a distrun
worker those read the launcher's view of the distrun process, not the worker's: in a per-node launch every
worker of a node would join as the node's task. distrun registers `DistrunCluster` first in that order:

- distrun's sitecustomize.py, which runs in every Python worker, registers it when JAX's cluster module is
  imported (nothing happens in workers that never import JAX);
- `import distrun.jax` registers it where sitecustomize does not run (`python -S`, `python -I`, an embedded
  interpreter); import it before calling `jax.distributed.initialize()`.

It reads what distrun sets for every worker: JAX_COORDINATOR_ADDRESS (JAX's service, in worker 0, on a port
distrun chose for the epoch), DISTRUN_NUM_PROCESSES and DISTRUN_PROCESS_ID; the local devices are left to
CUDA_VISIBLE_DEVICES, which distrun narrowed, or to JAX_LOCAL_DEVICE_IDS with --device-binding none.
Explicit arguments still win, and `cluster_detection_method="distrun"` names it. On a TPU VM with one
worker per host, where JAX's own TPU detection finds the same world, distrun's steps aside.

The same file is written by distrun beside its sitecustomize.py as `_distrun_jax`; both copies keep one
class in JAX's list. It supports JAX 0.4 to 0.12: `get_coordinator_address()` with or without
`timeout_secs` and `override_coordinator_port`, with and without `opt_in_only_method` and detection by name.
"""
import os

NAME = "distrun"


def plan():
    """(coordinator, num_processes, process_id) of this worker, or None outside a distrun worker."""
    address = os.environ.get("JAX_COORDINATOR_ADDRESS")
    count = os.environ.get("DISTRUN_NUM_PROCESSES")
    index = os.environ.get("DISTRUN_PROCESS_ID")
    if not address or count is None or index is None:
        return None
    try:
        return address, int(count), int(index)
    except ValueError:
        return None


def local_device_id():
    """The one device id of JAX_LOCAL_DEVICE_IDS (--device-binding none), for JAX releases that read only
    get_local_process_id(); None when distrun narrowed the devices (or several were given: JAX itself reads
    the variable in the releases that take a list)."""
    ids = [part for part in os.environ.get("JAX_LOCAL_DEVICE_IDS", "").split(",") if part.strip()]
    if len(ids) != 1:
        return None
    try:
        return int(ids[0])
    except ValueError:
        return None


def _jax_tpu_finds_the_same_world(cluster_types, ours):
    # One worker per TPU host in the first epoch: JAX's TPU clusters read the same slice and do more (TPU
    # topology and multislice settings), so distrun's leaves them the job where one of them is present.
    if (os.environ.get("DISTRUN_CLUSTER") != "tpu" or os.environ.get("DISTRUN_LOCAL_WORLD_SIZE") != "1"
            or os.environ.get("DISTRUN_EPOCH", "0") != "0"):
        return False
    for other in list(cluster_types):
        if other is ours or getattr(other, "opt_in_only_method", False) or "tpu" not in other.__name__.lower():
            continue
        try:
            if other.is_env_present():
                return True
        except Exception:
            continue
    return False


def _define(cluster_env):
    class DistrunCluster(cluster_env):
        """distrun's plan for this worker (see the distrun.jax module)."""
        name = NAME
        opt_in_only_method = False

        @classmethod
        def is_env_present(cls):
            if plan() is None:
                return False
            return not _jax_tpu_finds_the_same_world(cluster_env._cluster_types, cls)

        @classmethod
        def get_coordinator_address(cls, timeout_secs=None, override_coordinator_port=None, **_):
            address = plan()[0]
            if override_coordinator_port:
                address = address.rsplit(":", 1)[0] + ":" + str(override_coordinator_port)
            return address

        @classmethod
        def get_process_count(cls):
            return plan()[1]

        @classmethod
        def get_process_id(cls):
            return plan()[2]

        @classmethod
        def get_local_process_id(cls):
            return local_device_id()

    return DistrunCluster


def register():
    """Puts distrun's cluster first in JAX's detection order (importing JAX's cluster module); returns it.
    Idempotent: a class of distrun's already registered, by either copy of this file, is moved, not added."""
    import sys
    # From sys.modules first: distrun's sitecustomize calls this while JAX is still importing the module.
    clusters = sys.modules.get("jax._src.clusters")
    if clusters is None:
        from jax._src import clusters
    cluster_env = clusters.ClusterEnv
    types = cluster_env._cluster_types
    ours = next((c for c in types if getattr(c, "name", None) == NAME), None)
    if ours is None:
        before = len(types)
        ours = _define(cluster_env)
        # Releases whose ClusterEnv does not register its subclasses itself.
        if len(types) == before:
            types.append(ours)
    types[:] = [ours] + [c for c in types if c is not ours and getattr(c, "name", None) != NAME]
    return ours


DistrunCluster = register() if __name__ == "distrun.jax" else None
