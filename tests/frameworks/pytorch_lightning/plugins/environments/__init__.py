"""Stand-in for pytorch_lightning.plugins.environments.

In 1.9 these classes come from lightning_fabric 1.9; TorchElastic, Kubeflow, LSF and Lightning behave as in
the stand-in Lightning 2.x package and are shared with it. SLURMEnvironment differs by release (see
slurm_environment.py); BaguaEnvironment existed only in 1.x.
"""
from lightning.fabric.plugins.environments import ClusterEnvironment  # noqa: F401
from lightning.fabric.plugins.environments import KubeflowEnvironment  # noqa: F401
from lightning.fabric.plugins.environments import LightningEnvironment  # noqa: F401
from lightning.fabric.plugins.environments import LSFEnvironment  # noqa: F401
from lightning.fabric.plugins.environments import TorchElasticEnvironment  # noqa: F401
from pytorch_lightning.plugins.environments.bagua_environment import BaguaEnvironment  # noqa: F401
from pytorch_lightning.plugins.environments.slurm_environment import SLURMEnvironment  # noqa: F401
