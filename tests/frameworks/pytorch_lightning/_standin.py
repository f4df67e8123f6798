"""Which PyTorch Lightning 1.x release this stand-in behaves as (stand-in only): STANDIN_PL_VERSION,
default "1.9.5"; 1.7.x, 1.8.x and 1.9.x are modelled. Releases 1.7 and 1.8-1.9 choose the cluster
environment differently:

* 1.7 (accelerator_connector.py with BaguaEnvironment and GPUAccelerator): SLURM is used only when "SLURM manages the tasks": SLURMEnvironment.detect() (SLURM_NTASKS
  set), the job is not named "bash", and int(SLURM_NTASKS, 0) == number of devices * num_nodes
  (AcceleratorConnector._is_slurm_managing_tasks); then BaguaEnvironment, TorchElasticEnvironment,
  KubeflowEnvironment, LSFEnvironment; else LightningEnvironment.
* 1.8 / 1.9: that rule was removed (Lightning-AI/pytorch-lightning#14300, "Remove silent behavior when
  num_slurm_tasks does not correspond to number of processes in Trainer", merged for 1.8): the first of
  SLURMEnvironment, BaguaEnvironment, TorchElasticEnvironment, KubeflowEnvironment, LSFEnvironment whose
  detect() is true; SLURM's detect() also requires srun (SLURM_NTASKS set, job not named "bash"), and
  constructing it raises when SLURM_NTASKS > 1 without SLURM_NTASKS_PER_NODE (#15011).
"""
import os

VERSION = os.environ.get("STANDIN_PL_VERSION") or "1.9.5"
try:
    _major, _minor = (int(part) for part in VERSION.split(".")[:2])
except ValueError:
    _major, _minor = 0, 0
if _major != 1 or not 7 <= _minor <= 9:
    raise ImportError(f"stand-in pytorch_lightning: STANDIN_PL_VERSION={VERSION!r} is not modelled; "
                      "choose a 1.7, 1.8 or 1.9 release (Lightning 2.x is the stand-in `lightning` package)")

SLURM_MANAGES_TASKS_RULE = _minor <= 7
