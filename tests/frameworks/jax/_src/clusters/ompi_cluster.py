"""Stand-in for jax/_src/clusters/ompi_cluster.py (jax-ml/jax).

* 0.4.14 / 0.4.31 (jax-ml/jax@f936613 era, 01f4709 for the `name`): present when OMPI_MCA_orte_hnp_uri is set
  (Open MPI < 5, launched by mpirun/mpiexec). Coordinator: the launcher's IP from that URI ("tcp://IP," or
  "tcp://IP:", or "tcp6://[IP," / "tcp6://[IP]"), port = (jobid // 2**12) % 2**12 + 61440 where jobid is the
  URI's text before the first ".". Count/rank/local rank: OMPI_COMM_WORLD_SIZE/_RANK/_LOCAL_RANK.
* newest (the "Open MPI 5 rule"): also present when OMPI_COMM_WORLD_SIZE, _RANK and _LOCAL_RANK are all set
  and the release is Open MPI >= 5: OMPI_VERSION's major when it parses, otherwise "no ORTE URI". Open MPI 5
  (PRRTE) routes every answer to Mpi4pyCluster and fails with "Open MPI 5 or newer requires mpi4py for
  distributed initialization." without it. JAX_COORDINATOR_PORT (override_coordinator_port) replaces the
  port computed from the job id.
"""
from __future__ import annotations

import os
import re

from jax._src import _standin
from jax._src import clusters

# OMPI_MCA_orte_hnp_uri exists only when processes are launched via mpirun or mpiexec (ORTE, Open MPI < 5)
_ORTE_URI = 'OMPI_MCA_orte_hnp_uri'
_OMPI_VERSION = 'OMPI_VERSION'
_PROCESS_COUNT = 'OMPI_COMM_WORLD_SIZE'
_PROCESS_ID = 'OMPI_COMM_WORLD_RANK'
_LOCAL_PROCESS_ID = 'OMPI_COMM_WORLD_LOCAL_RANK'


def _orte_address(port=None):
    """'1531576320.0;tcp://10.96.0.1,10.148.0.1:34911' -> '10.96.0.1:<port>';
    '1314521088.0;tcp6://[fe80::1,2620::2]:43370' -> 'fe80::1:<port>' (JAX writes the IPv6 host unbracketed)."""
    uri = os.environ[_ORTE_URI]
    if not port:
        # ORTE job ids are multiples of 4096: use the quotient, folded into [61440, 65535].
        port = (int(uri.split(".", 1)[0]) >> 12) % 4096 + 61440
    found = re.search(r"tcp://(.+?)[,:]|tcp6://\[(.+?)[,\]]", uri)
    if found is None:
        raise RuntimeError('Could not parse coordinator IP address from Open MPI environment.')
    host = found.group(1) if found.group(1) is not None else found.group(2)
    return f"{host}:{port}"


if _standin.OLD:
    class OmpiCluster(clusters.ClusterEnv):
        @classmethod
        def is_env_present(cls) -> bool:
            return _ORTE_URI in os.environ

        @classmethod
        def get_coordinator_address(cls) -> str:
            return _orte_address()

        @classmethod
        def get_process_count(cls) -> int:
            return int(os.environ[_PROCESS_COUNT])

        @classmethod
        def get_process_id(cls) -> int:
            return int(os.environ[_PROCESS_ID])

        @classmethod
        def get_local_process_id(cls):
            return int(os.environ[_LOCAL_PROCESS_ID])

elif _standin.MID:
    class OmpiCluster(clusters.ClusterEnv):
        name: str = "ompi"

        @classmethod
        def is_env_present(cls) -> bool:
            return _ORTE_URI in os.environ

        @classmethod
        def get_coordinator_address(cls, timeout_secs) -> str:
            return _orte_address()

        @classmethod
        def get_process_count(cls) -> int:
            return int(os.environ[_PROCESS_COUNT])

        @classmethod
        def get_process_id(cls) -> int:
            return int(os.environ[_PROCESS_ID])

        @classmethod
        def get_local_process_id(cls):
            return int(os.environ[_LOCAL_PROCESS_ID])

else:
    class OmpiCluster(clusters.ClusterEnv):
        name: str = "ompi"

        @classmethod
        def _is_ompi_5(cls) -> bool:
            # OMPI_VERSION when available; otherwise PRRTE (Open MPI 5) is told from ORTE by the missing URI.
            if not all(v in os.environ for v in (_PROCESS_COUNT, _PROCESS_ID, _LOCAL_PROCESS_ID)):
                return False
            try:
                major_version = int(os.environ.get(_OMPI_VERSION, '').split('.', maxsplit=1)[0])
            except ValueError:
                return _ORTE_URI not in os.environ
            return major_version >= 5

        @classmethod
        def _mpi4py_cluster(cls):
            from jax._src.clusters.mpi4py_cluster import Mpi4pyCluster
            if not Mpi4pyCluster.is_env_present():
                raise RuntimeError("Open MPI 5 or newer requires mpi4py for distributed initialization.")
            return Mpi4pyCluster

        @classmethod
        def is_env_present(cls) -> bool:
            return _ORTE_URI in os.environ or cls._is_ompi_5()

        @classmethod
        def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
            if cls._is_ompi_5():
                return cls._mpi4py_cluster().get_coordinator_address(
                    timeout_secs=timeout_secs, override_coordinator_port=override_coordinator_port)
            return _orte_address(override_coordinator_port)

        @classmethod
        def get_process_count(cls) -> int:
            if cls._is_ompi_5():
                return cls._mpi4py_cluster().get_process_count()
            return int(os.environ[_PROCESS_COUNT])

        @classmethod
        def get_process_id(cls) -> int:
            if cls._is_ompi_5():
                return cls._mpi4py_cluster().get_process_id()
            return int(os.environ[_PROCESS_ID])

        @classmethod
        def get_local_process_id(cls):
            if cls._is_ompi_5():
                return cls._mpi4py_cluster().get_local_process_id()
            return int(os.environ[_LOCAL_PROCESS_ID])
