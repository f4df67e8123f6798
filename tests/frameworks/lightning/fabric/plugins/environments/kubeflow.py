"""Stand-in for lightning/fabric/plugins/environments/kubeflow.py (commit 2acfd52).

detect(): KUBERNETES_PORT, MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK are all set and none of
GROUP_RANK, LOCAL_RANK, LOCAL_WORLD_SIZE (torchelastic's) is. local_rank 0, node_rank = global rank.
Lightning 2.x's connectors do not try it; 1.x's did.
"""
import logging
import os

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment

log = logging.getLogger(__name__)


class KubeflowEnvironment(ClusterEnvironment):
    """Environment for distributed training using Kubeflow's PyTorchJob operator."""

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        return os.environ["MASTER_ADDR"]

    @property
    def main_port(self) -> int:
        return int(os.environ["MASTER_PORT"])

    @staticmethod
    def detect() -> bool:
        required = {"KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"}
        excluded = {"GROUP_RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"}  # set by torchelastic
        present = set(os.environ)
        return required <= present and not (excluded & present)

    def world_size(self) -> int:
        return int(os.environ["WORLD_SIZE"])

    def set_world_size(self, size: int) -> None:
        log.debug("KubeflowEnvironment.set_world_size was called, but setting world size is not allowed.")

    def global_rank(self) -> int:
        return int(os.environ["RANK"])

    def set_global_rank(self, rank: int) -> None:
        log.debug("KubeflowEnvironment.set_global_rank was called, but setting global rank is not allowed.")

    def local_rank(self) -> int:
        return 0

    def node_rank(self) -> int:
        return self.global_rank()
