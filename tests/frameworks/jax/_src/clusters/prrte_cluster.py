"""Stand-in for jax/_src/clusters/prrte_cluster.py (jax-ml/jax@61bca85, newest sources only).

Present when PRTE_LAUNCHED == "1" (Open MPI 5's mpirun is PRRTE's prterun). Coordinator host: the first of
PMIX_SERVER_URI41, _URI4, _URI3, _URI21, _URI2 that is set, "tcp4://HOST:" (or "tcp6://[HOST]", kept in
brackets); port: JAX_COORDINATOR_PORT, else the number between "-" and "@" in PMIX_NAMESPACE
("prterun-node18-12345@1" -> 12345) % 4096 + 61440. Count/rank/local rank: OMPI_COMM_WORLD_SIZE/_RANK/
_LOCAL_RANK. Detection order: the upstream test (tests/.../PrrteClusterTest.test_auto_detect) expects a
PRRTE environment, which also satisfies OmpiCluster's Open MPI 5 rule, to be answered by this class, so the
stand-in registers it ahead of OmpiCluster (see clusters/__init__.py).
"""
from __future__ import annotations

import os
import re

from jax._src import _standin
from jax._src import clusters

if not _standin.NEW:
    raise ImportError("jax._src.clusters.prrte_cluster only exists in the newest JAX sources")

_PMIX_SERVER_URIS = ("PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21",
                     "PMIX_SERVER_URI2")


class PrrteCluster(clusters.ClusterEnv):
    name: str = "prrte"

    @classmethod
    def is_env_present(cls) -> bool:
        return os.environ.get("PRTE_LAUNCHED") == "1"

    @classmethod
    def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
        uri = next((os.environ[name] for name in _PMIX_SERVER_URIS if name in os.environ), None)
        if uri is None:
            raise RuntimeError("Could not find a PMIX_SERVER_URI in the PRRTE environment.")
        v4 = re.search(r"tcp4://([^,:;]+):", uri)
        v6 = re.search(r"tcp6://\[([^,\]]+)\]", uri)
        if v4 is not None:
            host = v4.group(1)
        elif v6 is not None:
            host = f"[{v6.group(1)}]"
        else:
            raise RuntimeError("Could not parse coordinator IP address from PRRTE environment.")
        if override_coordinator_port:
            port = override_coordinator_port
        else:
            job = re.search(r"-(\d+)@", os.environ.get("PMIX_NAMESPACE", ""))
            if job is None:
                raise RuntimeError("Could not parse job ID from PMIX_NAMESPACE in PRRTE environment.")
            port = str(int(job.group(1)) % 4096 + 61440)
        return f"{host}:{port}"

    @classmethod
    def get_process_count(cls) -> int:
        return int(os.environ["OMPI_COMM_WORLD_SIZE"])

    @classmethod
    def get_process_id(cls) -> int:
        return int(os.environ["OMPI_COMM_WORLD_RANK"])

    @classmethod
    def get_local_process_id(cls):
        return int(os.environ["OMPI_COMM_WORLD_LOCAL_RANK"])
