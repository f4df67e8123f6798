"""Stand-in for jax/_src/clusters/mpi4py_cluster.py (jax-ml/jax#20174, first released in 0.4.31; newest:
jax-ml/jax@2584db8). Not part of 0.4.14: importing it there fails as it would.

Opt-in only (`opt_in_only_method = True`): plain detection skips it; cluster_detection_method="mpi4py"
chooses it. Present when the mpi4py module can be found (importlib.util.find_spec). Rank 0 broadcasts
"<its hostname>:<port>", port = hash(hostname) % 4096 + 61440 (Python's salted str hash, so it differs from
run to run), or JAX_COORDINATOR_PORT in the newest sources. Count and rank: MPI.COMM_WORLD. Local rank:
0.4.31 splits COMM_WORLD by the index of this host among the sorted distinct hostnames (JAX used
numpy.unique; the stand-in sorts without numpy); the newest sources use Split_type(COMM_TYPE_SHARED).
"""
from __future__ import annotations

import socket
from importlib.util import find_spec

from jax._src import _standin
from jax._src import clusters

if _standin.OLD:
    raise ImportError("jax._src.clusters.mpi4py_cluster does not exist before JAX 0.4.31")


def _coordinator(override_coordinator_port=None):
    from mpi4py import MPI
    world = MPI.COMM_WORLD
    if world.Get_rank() == 0:
        hostname = socket.gethostname()
        port = override_coordinator_port or str(hash(hostname) % 2**12 + (65535 - 2**12 + 1))
        address = f"{hostname}:{port}"
    else:
        address = "None"
    return world.bcast(address, root=0)


class Mpi4pyCluster(clusters.ClusterEnv):
    name: str = "mpi4py"
    opt_in_only_method: bool = True

    @classmethod
    def is_env_present(cls) -> bool:
        return find_spec("mpi4py") is not None

    if _standin.MID:
        @classmethod
        def get_coordinator_address(cls, timeout_secs) -> str:
            return _coordinator()
    else:
        @classmethod
        def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
            return _coordinator(override_coordinator_port)

    @classmethod
    def get_process_count(cls) -> int:
        from mpi4py import MPI
        return int(MPI.COMM_WORLD.Get_size())

    @classmethod
    def get_process_id(cls) -> int:
        from mpi4py import MPI
        return int(MPI.COMM_WORLD.Get_rank())

    @classmethod
    def get_local_process_id(cls):
        from mpi4py import MPI
        world = MPI.COMM_WORLD
        if _standin.MID:
            hostname = socket.gethostname()
            every = world.gather(hostname, root=0)
            hosts = sorted(set(every)) if world.Get_rank() == 0 else None
            hosts = world.bcast(hosts, root=0)
            local = world.Split(color=hosts.index(hostname))
        else:
            local = world.Split_type(MPI.COMM_TYPE_SHARED)
        return int(local.Get_rank())
