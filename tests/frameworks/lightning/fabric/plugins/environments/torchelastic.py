"""Stand-in for lightning/fabric/plugins/environments/torchelastic.py (commit 2acfd52).

detect() is `torch.distributed.is_available() and torch.distributed.is_torchelastic_launched()`; the latter
is `os.getenv("TORCHELASTIC_RUN_ID") is not None`, which the stand-in checks without importing torch.
WORLD_SIZE, RANK, LOCAL_RANK, GROUP_RANK (default 0); MASTER_ADDR / MASTER_PORT default to 127.0.0.1 / 12910
with a warning, written back to the environment.
"""
import logging
import os

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning.fabric.utilities.rank_zero import rank_zero_warn

log = logging.getLogger(__name__)


class TorchElasticEnvironment(ClusterEnvironment):
    """Environment for fault-tolerant and elastic training with torchelastic (torchrun)."""

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        if "MASTER_ADDR" not in os.environ:
            rank_zero_warn("MASTER_ADDR environment variable is not defined. Set as localhost")
            os.environ["MASTER_ADDR"] = "127.0.0.1"
        return os.environ["MASTER_ADDR"]

    @property
    def main_port(self) -> int:
        if "MASTER_PORT" not in os.environ:
            rank_zero_warn("MASTER_PORT environment variable is not defined. Set as 12910")
            os.environ["MASTER_PORT"] = "12910"
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    def detect() -> bool:
        """Returns ``True`` if the current process was launched using the torchelastic command."""
        return os.getenv("TORCHELASTIC_RUN_ID") is not None

    def world_size(self) -> int:
        return int(os.environ["WORLD_SIZE"])

    def set_world_size(self, size: int) -> None:
        log.debug("TorchElasticEnvironment.set_world_size was called, but setting world size is not allowed.")

    def global_rank(self) -> int:
        return int(os.environ["RANK"])

    def set_global_rank(self, rank: int) -> None:
        log.debug("TorchElasticEnvironment.set_global_rank was called, but setting global rank is not allowed.")

    def local_rank(self) -> int:
        return int(os.environ["LOCAL_RANK"])

    def node_rank(self) -> int:
        return int(os.environ.get("GROUP_RANK", 0))
