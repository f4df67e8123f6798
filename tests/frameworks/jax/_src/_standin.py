"""Which JAX release this stand-in behaves as (stand-in only; no such module exists in JAX).

The release is chosen by the environment variable STANDIN_JAX_VERSION when `jax` is first imported.
Three generations of JAX's cluster detection are reproduced, each named after the release whose sources
it follows (jax-ml/jax, jax/_src/clusters/*.py and jax/_src/distributed.py):

* "0.4.14" -- ClusterEnv without `name`/`opt_in_only_method`; get_coordinator_address() takes no argument;
  clusters OmpiCluster, SlurmCluster, TpuCluster (GCE metadata only); initialize() has no
  initialization_timeout (the client waits 300 s) and the service binds the coordinator address itself.
* "0.4.31" -- first release with mpi4py detection (jax-ml/jax#20174, merged 2024-07-08, after 0.4.30):
  `name`, `opt_in_only_method`, `cluster_detection_method`, Mpi4pyCluster (opt-in),
  get_coordinator_address(timeout_secs), BaseTpuCluster/GceTpuCluster/GkeTpuCluster, initialization_timeout,
  coordinator_bind_address / JAX_COORDINATOR_BIND_ADDRESS.
* "0.11.2" -- the newest sources: get_coordinator_address(timeout_secs, override_coordinator_port) fed from
  JAX_COORDINATOR_PORT, JAX_LOCAL_DEVICE_IDS, cluster_detection_method="deactivate", the Open MPI 5 rule,
  PrrteCluster, K8sCluster, TPU_PROCESS_ADDRESSES(_PATH) and TPU_SKIP_MDS_QUERY.

Any other value fails the import: a test that asks for a release this stand-in does not model should say
so loudly rather than get the behaviour of a neighbour.
"""
import os

DEFAULT_VERSION = "0.11.2"
GENERATIONS = ("0.4.14", "0.4.31", "0.11.2")

VERSION = os.environ.get("STANDIN_JAX_VERSION") or DEFAULT_VERSION
if VERSION not in GENERATIONS:
    raise ImportError(
        f"stand-in jax: STANDIN_JAX_VERSION={VERSION!r} is not modelled; choose one of "
        f"{', '.join(GENERATIONS)} (0.4.30 and earlier 0.4.2x releases have no mpi4py cluster and no "
        f"cluster_detection_method; those arrived in 0.4.31)")

GEN = tuple(int(part) for part in VERSION.split("."))
OLD = GEN == (0, 4, 14)        # 2023: no names, no arguments to get_coordinator_address
MID = GEN == (0, 4, 31)        # 2024: names, opt-in mpi4py, timeout_secs
NEW = GEN >= (0, 11, 2)        # newest: override_coordinator_port, JAX_LOCAL_DEVICE_IDS, PRRTE, K8s
