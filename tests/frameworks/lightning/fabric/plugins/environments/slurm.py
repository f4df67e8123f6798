"""Stand-in for lightning/fabric/plugins/environments/slurm.py (Lightning 2.x main branch).

detect(): warns (PossibleUserWarning, rank 0 only) when an `srun` executable is on PATH but the process was
not started by srun, and returns whether SLURM_NTASKS is set and the job name (SLURM_JOB_NAME) is neither
"bash" nor "interactive". Constructing it raises RuntimeError when SLURM_NTASKS > 1 and
SLURM_NTASKS_PER_NODE is unset ("You set `--ntasks=N` in your SLURM bash script, but this variable is not
supported. HINT: Use `--ntasks-per-node=N` instead."). world_size/global_rank/local_rank/node_rank:
SLURM_NTASKS, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID. main_address: MASTER_ADDR, else the first host
of SLURM_NODELIST (default 127.0.0.1; "host[5-9]" -> host5), written back to MASTER_ADDR. main_port:
MASTER_PORT, else the last 4 digits of SLURM_JOB_ID + 15000 (12910 without a job id), written back to
MASTER_PORT. validate_settings(): SLURM_NTASKS_PER_NODE must equal devices, SLURM_NNODES num_nodes.
"""
import logging
import os
import re
import shutil
import signal
import sys
from typing import Optional

from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment
from lightning.fabric.utilities.imports import _IS_WINDOWS
from lightning.fabric.utilities.rank_zero import rank_zero_warn
from lightning.fabric.utilities.warnings import PossibleUserWarning

log = logging.getLogger(__name__)


class SLURMEnvironment(ClusterEnvironment):
    """Cluster environment for training on a cluster managed by SLURM."""

    def __init__(self, auto_requeue: bool = True, requeue_signal: Optional[signal.Signals] = None) -> None:
        super().__init__()
        self.auto_requeue = auto_requeue
        if requeue_signal is None and not _IS_WINDOWS:
            requeue_signal = signal.SIGUSR1
        self.requeue_signal = requeue_signal
        self._validate_srun_used()
        self._validate_srun_variables()

    @property
    def creates_processes_externally(self) -> bool:
        return True

    @property
    def main_address(self) -> str:
        root_node = os.environ.get("MASTER_ADDR")
        if root_node is None:
            root_node = self.resolve_root_node_address(os.environ.get("SLURM_NODELIST", "127.0.0.1"))
            os.environ["MASTER_ADDR"] = root_node
        return root_node

    @property
    def main_port(self) -> int:
        # Every process of the job derives the same port from the job id.
        job_id = os.environ.get("SLURM_JOB_ID")
        port = int(job_id[-4:]) + 15000 if job_id is not None else 12910
        if "MASTER_PORT" in os.environ:
            port = int(os.environ["MASTER_PORT"])
        else:
            os.environ["MASTER_PORT"] = str(port)
        return port

    @staticmethod
    def detect() -> bool:
        """True when the process was started by srun and the job is not interactive ('bash'/'interactive')."""
        SLURMEnvironment._validate_srun_used()
        return _is_srun_used()

    @staticmethod
    def job_name() -> Optional[str]:
        return os.environ.get("SLURM_JOB_NAME")

    @staticmethod
    def job_id() -> Optional[int]:
        if _is_slurm_interactive_mode():
            return None
        job_id = os.environ.get("SLURM_JOB_ID")
        if job_id is None:
            return None
        try:
            return int(job_id)
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

    def validate_settings(self, num_devices: int, num_nodes: int) -> None:
        if _is_slurm_interactive_mode():
            return
        ntasks_per_node = os.environ.get("SLURM_NTASKS_PER_NODE")
        if ntasks_per_node is not None and int(ntasks_per_node) != num_devices:
            raise ValueError(
                f"You set `devices={num_devices}` in Lightning, but the number of tasks per node configured in SLURM"
                f" `--ntasks-per-node={ntasks_per_node}` does not match. HINT: Set `devices={ntasks_per_node}`.")
        nnodes = os.environ.get("SLURM_NNODES")
        if nnodes is not None and int(nnodes) != num_nodes:
            raise ValueError(
                f"You set `num_nodes={num_nodes}` in Lightning, but the number of nodes configured in SLURM"
                f" `--nodes={nnodes}` does not match. HINT: Set `num_nodes={nnodes}`.")

    @staticmethod
    def resolve_root_node_address(nodes: str) -> str:
        """The first host of 'host0 host1', 'host0,host1' or 'host[5-9]' (-> host5) style node lists."""
        nodes = re.sub(r"\[(.*?)[,-].*\]", "\\1", nodes)  # first node of every range
        nodes = re.sub(r"\[(.*?)\]", "\\1", nodes)  # a range of a single number
        return nodes.split(" ")[0].split(",")[0]

    @staticmethod
    def _validate_srun_used() -> None:
        if _IS_WINDOWS:
            return
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


def _is_srun_used() -> bool:
    return "SLURM_NTASKS" in os.environ and not _is_slurm_interactive_mode()


def _is_slurm_interactive_mode() -> bool:
    return SLURMEnvironment.job_name() in ("bash", "interactive")
