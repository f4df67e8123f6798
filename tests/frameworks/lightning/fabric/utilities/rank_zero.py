"""Stand-in for lightning.fabric.utilities.rank_zero: warnings only on global rank 0, the rank being read as
lightning_utilities does from RANK, LOCAL_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK (first set), else 0."""
import os
import warnings
from functools import wraps


def _get_rank():
    for key in ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK"):
        rank = os.environ.get(key)
        if rank is not None:
            return int(rank)
    return 0


def rank_zero_only(fn):
    @wraps(fn)
    def wrapped(*args, **kwargs):
        if rank_zero_only.rank == 0:
            return fn(*args, **kwargs)
        return None
    return wrapped


rank_zero_only.rank = _get_rank()


@rank_zero_only
def rank_zero_warn(message, stacklevel=4, **kwargs):
    warnings.warn(message, stacklevel=stacklevel, **kwargs)
