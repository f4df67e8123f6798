"""Stand-in for lightning/fabric/plugins/environments/lightning.py (commit 2acfd52).

Always detected (the fallback). world_size 1 / global_rank 0 until the strategy sets them; local_rank
LOCAL_RANK (0); node_rank NODE_RANK, else GROUP_RANK, else 0; main_address MASTER_ADDR or 127.0.0.1;
main_port MASTER_PORT, else a free port found once; creates_processes_externally iff LOCAL_RANK is set.
"""
import os
import socket

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning.fabric.utilities.rank_zero import rank_zero_only


class LightningEnvironment(ClusterEnvironment):
    """The default environment: a single node, or processes launched by the user with LOCAL_RANK etc."""

    def __init__(self) -> None:
        super().__init__()
        self._main_port = -1
        self._global_rank = 0
        self._world_size = 1

    @property
    def creates_processes_externally(self) -> bool:
        return "LOCAL_RANK" in os.environ

    @property
    def main_address(self) -> str:
        return os.environ.get("MASTER_ADDR", "127.0.0.1")

    @property
    def main_port(self) -> int:
        if self._main_port == -1:
            self._main_port = int(os.environ.get("MASTER_PORT", find_free_network_port()))
        return self._main_port

    @staticmethod
    def detect() -> bool:
        return True

    def world_size(self) -> int:
        return self._world_size

    def set_world_size(self, size: int) -> None:
        self._world_size = size

    def global_rank(self) -> int:
        return self._global_rank

    def set_global_rank(self, rank: int) -> None:
        self._global_rank = rank
        rank_zero_only.rank = rank

    def local_rank(self) -> int:
        return int(os.environ.get("LOCAL_RANK", 0))

    def node_rank(self) -> int:
        return int(os.environ.get("NODE_RANK", os.environ.get("GROUP_RANK", 0)))

    def teardown(self) -> None:
        os.environ.pop("WORLD_SIZE", None)


def find_free_network_port() -> int:
    """A port that is free on this host right now (bound to port 0 and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]
