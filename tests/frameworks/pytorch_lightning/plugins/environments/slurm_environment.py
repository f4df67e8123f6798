"""Stand-in for PyTorch Lightning 1.x's SLURMEnvironment.

* 1.7 (pytorch_lightning/plugins/environments/slurm_environment.py): detect() is just "SLURM_NTASKS is
  set"; no srun checks. main_address: the first entry of SLURM_NODELIST split on " " then ",", with a
  bracket range reduced to its first number ("node[3-5]" -> node3), default 127.0.0.1.
* 1.8 / 1.9 (lightning_fabric/plugins/environments/slurm.py of 1.9): detect() warns when `srun` is on PATH but
  unused and requires SLURM_NTASKS with a job not named "bash"; constructing it raises RuntimeError when
  SLURM_NTASKS > 1 and SLURM_NTASKS_PER_NODE is unset; main_address resolves SLURM_NODELIST by regex
  ("host0 host1", "host0,host1", "host[5-9]") and, unlike 2.x, ignores a preset MASTER_ADDR.
In both: main_port is MASTER_PORT, else the last 4 digits of SLURM_JOB_ID + 15000 (12910 without one), and
MASTER_ADDR/MASTER_PORT are written back; SLURM_NTASKS/_PROCID/_LOCALID/_NODEID give the world.
"""
import logging
import os
import re
import shutil
import sys

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning.fabric.utilities.rank_zero import rank_zero_warn
from lightning.fabric.utilities.warnings import PossibleUserWarning
from pytorch_lightning import _standin

log = logging.getLogger(__name__)


def _is_srun_used() -> bool:
    return "SLURM_NTASKS" in os.environ and SLURMEnvironment.job_name() != "bash"


class SLURMEnvironment(ClusterEnvironment):
    """Cluster environment for training on a cluster managed by SLURM."""

    def __init__(self, auto_requeue: bool = True, requeue_signal=None) -> None:
        super().__init__()
        self.auto_requeue = auto_requeue
        self.requeue_signal = requeue_signal
        if not _standin.SLURM_MANAGES_TASKS_RULE:
            self._validate_srun_used()
            self._validate_srun_variables()

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        if _standin.SLURM_MANAGES_TASKS_RULE:
            nodelist = os.environ.get("SLURM_NODELIST")
            root_node = nodelist.split(" ")[0].split(",")[0] if nodelist else "127.0.0.1"
            if "[" in root_node:
                name, numbers = root_node.split("[", maxsplit=1)
                first = numbers.split(",", maxsplit=1)[0].split("-")[0]
                root_node = name + re.sub("[^0-9]", "", first)
        else:
            root_node = self.resolve_root_node_address(os.environ.get("SLURM_NODELIST", "127.0.0.1"))
        os.environ["MASTER_ADDR"] = root_node
        return root_node

    @property
    def main_port(self) -> int:
        job_id = os.environ.get("SLURM_JOB_ID")
        port = int(job_id[-4:]) + 15000 if job_id is not None else 12910
        if "MASTER_PORT" in os.environ:
            port = int(os.environ["MASTER_PORT"])
        else:
            os.environ["MASTER_PORT"] = str(port)
        return port

    @staticmethod
    def detect() -> bool:
        if _standin.SLURM_MANAGES_TASKS_RULE:
            return "SLURM_NTASKS" in os.environ
        SLURMEnvironment._validate_srun_used()
        return _is_srun_used()

    @staticmethod
    def job_name():
        return os.environ.get("SLURM_JOB_NAME")

    @staticmethod
    def job_id():
        if SLURMEnvironment.job_name() == "bash":
            return None
        job_id = os.environ.get("SLURM_JOB_ID")
        try:
            return int(job_id) if job_id is not None else None
        except ValueError:
            return None

    def world_size(self) -> int:
        return int(os.environ["SLURM_NTASKS"])

    def set_world_size(self, size: int) -> None:
        log.debug("SLURMEnvironment.set_world_size was called, but setting world size is not allowed. Ignored.")

    def global_rank(self) -> int:
        return int(os.environ["SLURM_PROCID"])

    def set_global_rank(self, rank: int) -> None:
        log.debug("SLURMEnvironment.set_global_rank was called, but setting global rank is not allowed. Ignored.")

    def local_rank(self) -> int:
        return int(os.environ["SLURM_LOCALID"])

    def node_rank(self) -> int:
        return int(os.environ["SLURM_NODEID"])

    @staticmethod
    def resolve_root_node_address(nodes: str) -> str:
        nodes = re.sub(r"\[(.*?)[,-].*\]", "\\1", nodes)
        nodes = re.sub(r"\[(.*?)\]", "\\1", nodes)
        return nodes.split(" ")[0].split(",")[0]

    @staticmethod
    def _validate_srun_used() -> None:
        if shutil.which("srun") is not None and not _is_srun_used():
            hint = " ".join(["srun", os.path.basename(sys.executable), *sys.argv])[:64]
            rank_zero_warn(
                "The `srun` command is available on your system but is not used. HINT: If your intention is to run"
                f" Lightning on SLURM, prepend your python command with `srun` like so: {hint} ...",
                category=PossibleUserWarning)

    @staticmethod
    def _validate_srun_variables() -> None:
        ntasks = int(os.environ.get("SLURM_NTASKS", "1"))
        if ntasks > 1 and "SLURM_NTASKS_PER_NODE" not in os.environ:
            raise RuntimeError(
                f"You set `--ntasks={ntasks}` in your SLURM bash script, but this variable is not supported."
                f" HINT: Use `--ntasks-per-node={ntasks}` instead.")
