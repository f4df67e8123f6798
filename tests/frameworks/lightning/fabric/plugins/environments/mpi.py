"""Stand-in for lightning/fabric/plugins/environments/mpi.py (commit 88a6164).

`_MPI4PY_AVAILABLE` follows lightning_utilities' RequirementCache("mpi4py"): the distribution's metadata,
or failing that an importable module. detect(): False without mpi4py; else `from mpi4py import MPI` (which
initializes MPI) and COMM_WORLD.Get_size() > 1. Constructing it without mpi4py raises ModuleNotFoundError.
world_size / global_rank from COMM_WORLD; node rank = index of this hostname among the sorted distinct
hostnames; local rank = rank in COMM_WORLD split by node; main address/port broadcast from rank 0
(its hostname, a free port).
"""
import importlib.util
import logging
import socket
from functools import lru_cache

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning.fabric.plugins.environments.lightning import find_free_network_port

log = logging.getLogger(__name__)


class _RequirementCache:
    def __init__(self, requirement):
        self.requirement = requirement
        try:
            from importlib import metadata
            metadata.version(requirement)
            self.available, self.message = True, f"Requirement {requirement!r} met"
        except Exception as ex:  # no metadata: fall back to the module, as lightning_utilities does
            self.available = importlib.util.find_spec(requirement) is not None
            self.message = (f"Module {requirement!r} available" if self.available else
                            f"{ex.__class__.__name__}: {ex}. HINT: Try running `pip install -U {requirement!r}`")

    def __bool__(self):
        return self.available

    def __str__(self):
        return self.message


_MPI4PY_AVAILABLE = _RequirementCache("mpi4py")


class MPIEnvironment(ClusterEnvironment):
    """An environment for running on clusters with processes created through MPI (requires mpi4py)."""

    def __init__(self) -> None:
        if not _MPI4PY_AVAILABLE:
            raise ModuleNotFoundError(str(_MPI4PY_AVAILABLE))
        from mpi4py import MPI
        self._comm_world = MPI.COMM_WORLD
        self._comm_local = None
        self._node_rank = None
        self._main_address = None
        self._main_port = None

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        if self._main_address is None:
            self._main_address = self._comm_world.bcast(socket.gethostname(), root=0)
        return self._main_address

    @property
    def main_port(self) -> int:
        if self._main_port is None:
            self._main_port = self._comm_world.bcast(find_free_network_port(), root=0)
        return self._main_port

    @staticmethod
    def detect() -> bool:
        """True if mpi4py is installed and MPI reports a world size greater than 1."""
        if not _MPI4PY_AVAILABLE:
            return False
        from mpi4py import MPI
        return MPI.COMM_WORLD.Get_size() > 1

    @lru_cache(1)
    def world_size(self) -> int:
        return self._comm_world.Get_size()

    def set_world_size(self, size: int) -> None:
        log.debug("MPIEnvironment.set_world_size was called, but setting world size is not allowed. Ignored.")

    @lru_cache(1)
    def global_rank(self) -> int:
        return self._comm_world.Get_rank()

    def set_global_rank(self, rank: int) -> None:
        log.debug("MPIEnvironment.set_global_rank was called, but setting global rank is not allowed. Ignored.")

    @lru_cache(1)
    def local_rank(self) -> int:
        if self._comm_local is None:
            self._init_comm_local()
        return self._comm_local.Get_rank()

    def node_rank(self) -> int:
        if self._node_rank is None:
            self._init_comm_local()
        return self._node_rank

    def _init_comm_local(self) -> None:
        hostname = socket.gethostname()
        every = self._comm_world.gather(hostname, root=0)  # None on the other ranks
        hosts = sorted(set(every)) if every is not None else []
        hosts = self._comm_world.bcast(hosts, root=0)
        self._node_rank = hosts.index(hostname)
        self._comm_local = self._comm_world.Split(color=self._node_rank)
