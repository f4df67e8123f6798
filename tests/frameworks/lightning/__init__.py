"""A stand-in Lightning 2.x for tests: the cluster environments and how Fabric/Trainer choose one.

Mirrors Lightning-AI/pytorch-lightning, src/lightning/fabric/plugins/environments/*.py (slurm.py of the
2.x main branch with `_is_slurm_interactive_mode`, the others at commit 2acfd52 / 88a6164 / d4a30c9) and
the connectors' `_choose_and_init_cluster_environment` (lightning/fabric/connector.py and
lightning/pytorch/trainer/connectors/accelerator_connector.py: TorchElastic, SLURM, LSF, MPI, else
Lightning). torch is not imported: TorchElasticEnvironment.detect() is torch's
is_torchelastic_launched(), i.e. TORCHELASTIC_RUN_ID is set.
"""
__version__ = "2.5.0"
