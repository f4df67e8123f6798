"""Stand-in for the cluster-environment choice of pytorch_lightning/trainer/connectors/accelerator_connector.py
(AcceleratorConnector._choose_and_init_cluster_environment), per release (pytorch_lightning/_standin.py):

* 1.7: SLURMEnvironment when _is_slurm_managing_tasks() -- SLURMEnvironment.detect(), job not named
  "bash", and int(SLURM_NTASKS, 0) == len(parallel devices) * num_nodes; else the first detected of
  BaguaEnvironment, TorchElasticEnvironment, KubeflowEnvironment, LSFEnvironment; else LightningEnvironment.
* 1.8 / 1.9: the first detected of SLURMEnvironment, BaguaEnvironment, TorchElasticEnvironment,
  KubeflowEnvironment, LSFEnvironment; else LightningEnvironment. devices/num_nodes do not take part.

A ClusterEnvironment passed as a plugin wins in every release.
"""
import os

from pytorch_lightning import _standin
from pytorch_lightning.plugins.environments import (
    BaguaEnvironment,
    ClusterEnvironment,
    KubeflowEnvironment,
    LightningEnvironment,
    LSFEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)


def _device_count(devices):
    return devices if isinstance(devices, int) else len(devices)


def _is_slurm_managing_tasks(devices, num_nodes) -> bool:
    if not SLURMEnvironment.detect() or SLURMEnvironment.job_name() == "bash":
        return False
    total_requested_devices = _device_count(devices) * num_nodes
    return int(os.environ["SLURM_NTASKS"], 0) == total_requested_devices


def choose_cluster_environment(devices=1, num_nodes=1, cluster_environment=None) -> ClusterEnvironment:
    """What Trainer(devices=..., num_nodes=..., plugins=[cluster_environment]) would use. `devices` is the
    number of parallel devices (an int) or their list."""
    if isinstance(cluster_environment, ClusterEnvironment):
        return cluster_environment
    if _standin.SLURM_MANAGES_TASKS_RULE:
        if _is_slurm_managing_tasks(devices, num_nodes):
            return SLURMEnvironment()
        candidates = (BaguaEnvironment, TorchElasticEnvironment, KubeflowEnvironment, LSFEnvironment)
    else:
        candidates = (SLURMEnvironment, BaguaEnvironment, TorchElasticEnvironment, KubeflowEnvironment,
                      LSFEnvironment)
    for env_type in candidates:
        if env_type.detect():
            return env_type()
    return LightningEnvironment()
