"""Stand-in for lightning.fabric.plugins.environments."""
from lightning.fabric.plugins.environments.cluster_environment import ClusterEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.kubeflow import KubeflowEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.lightning import LightningEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.lsf import LSFEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.mpi import MPIEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.slurm import SLURMEnvironment  # noqa: F401
from lightning.fabric.plugins.environments.torchelastic import TorchElasticEnvironment  # noqa: F401
