"""Stand-in for the cluster-environment choice of lightning/fabric/connector.py
(`_Connector._choose_and_init_cluster_environment`; the Trainer's accelerator_connector.py does the same in
2.x): a ClusterEnvironment given as a plugin wins; otherwise the first of TorchElasticEnvironment (first
because torchrun can run inside SLURM), SLURMEnvironment, LSFEnvironment, MPIEnvironment whose detect() is
true is constructed; otherwise LightningEnvironment.
"""
from lightning.fabric.plugins.environments import (
    ClusterEnvironment,
    LightningEnvironment,
    LSFEnvironment,
    MPIEnvironment,
    SLURMEnvironment,
    TorchElasticEnvironment,
)


def choose_cluster_environment(cluster_environment=None) -> ClusterEnvironment:
    """What Fabric(plugins=[cluster_environment]) or Trainer(...) would use as its cluster environment."""
    if isinstance(cluster_environment, ClusterEnvironment):
        return cluster_environment
    for env_type in (TorchElasticEnvironment, SLURMEnvironment, LSFEnvironment, MPIEnvironment):
        if env_type.detect():
            return env_type()
    return LightningEnvironment()
