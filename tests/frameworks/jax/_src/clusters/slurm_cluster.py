"""Stand-in for jax/_src/clusters/slurm_cluster.py (jax-ml/jax@f936613 for 0.4.14, 0d57c72 era for 0.4.31).

Present when SLURM_JOB_ID is set. Coordinator: the first host of SLURM_STEP_NODELIST ('node001',
'node001,host2' -> node001; 'node[001-0015],host2' or 'node[001,007-015],host2' -> node001) and port
SLURM_JOB_ID % 4096 + 61440. Count/rank/local rank: SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID.
0.4.14 has no `name`; 0.4.31 names it "slurm" and takes timeout_secs; the newest sources also take
override_coordinator_port (JAX_COORDINATOR_PORT), which replaces the port computed from the job id, as the
newest Open MPI, mpi4py and PRRTE clusters do.
"""
from __future__ import annotations

import os

from jax._src import _standin
from jax._src import clusters

_JOBID_PARAM = 'SLURM_JOB_ID'
_NODE_LIST = 'SLURM_STEP_NODELIST'
_PROCESS_COUNT = 'SLURM_NTASKS'
_PROCESS_ID = 'SLURM_PROCID'
_LOCAL_PROCESS_ID = 'SLURM_LOCALID'
_NUM_NODES = 'SLURM_STEP_NUM_NODES'


def _first_host(node_list):
    """'node001' / 'node001,host2' -> 'node001'; 'node[001-0015],host2' / 'node[001,007-015],host2' -> 'node001'
    (JAX's rule: text up to the first ',' or '['; after a '[', the prefix plus the range's first number)."""
    cut = next((i for i, ch in enumerate(node_list) if ch in ",["), len(node_list))
    if cut == len(node_list) or node_list[cut] == ",":
        return node_list[:cut]
    inside = node_list[cut + 1:]
    end = next((i for i, ch in enumerate(inside) if ch in ",-"), None)
    return node_list[:cut] + inside[:end]


def _address(port=None):
    if not port:
        port = int(os.environ[_JOBID_PARAM]) % 4096 + 61440  # [65535 - 2**12 + 1, 65535]
    return f"{_first_host(os.environ[_NODE_LIST])}:{port}"


class _Slurm:
    @classmethod
    def is_env_present(cls) -> bool:
        return _JOBID_PARAM in os.environ

    @classmethod
    def get_process_count(cls) -> int:
        return int(os.environ[_PROCESS_COUNT])

    @classmethod
    def get_process_id(cls) -> int:
        return int(os.environ[_PROCESS_ID])

    @classmethod
    def get_local_process_id(cls):
        return int(os.environ[_LOCAL_PROCESS_ID])


if _standin.OLD:
    class SlurmCluster(_Slurm, clusters.ClusterEnv):
        @classmethod
        def get_coordinator_address(cls) -> str:
            return _address()

elif _standin.MID:
    class SlurmCluster(_Slurm, clusters.ClusterEnv):
        name: str = "slurm"

        @classmethod
        def get_coordinator_address(cls, timeout_secs) -> str:
            return _address()

else:
    class SlurmCluster(_Slurm, clusters.ClusterEnv):
        name: str = "slurm"

        @classmethod
        def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
            return _address(override_coordinator_port)
