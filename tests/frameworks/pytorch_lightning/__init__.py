"""A stand-in PyTorch Lightning 1.x for tests: its cluster environments and the Trainer's choice of one.

Mirrors Lightning-AI/pytorch-lightning 1.x: src/pytorch_lightning/trainer/connectors/accelerator_connector.py
(`_choose_and_init_cluster_environment`, `_is_slurm_managing_tasks`) and the environments it imports
(pytorch_lightning/plugins/environments in 1.7, lightning_fabric.plugins.environments in 1.9). The
release is chosen with STANDIN_PL_VERSION (see pytorch_lightning/_standin.py); torch is not imported.
"""
from pytorch_lightning._standin import VERSION as __version__  # noqa: F401
