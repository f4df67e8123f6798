"""A stand-in JAX for tests: only the way JAX finds its distributed world.

Put tests/frameworks on PYTHONPATH and choose the release with STANDIN_JAX_VERSION ("0.4.14", "0.4.31",
"0.11.2"; default "0.11.2"). What is modelled, per release, is written in the docstrings of
jax/_src/_standin.py, jax/_src/distributed.py and jax/_src/clusters/*.py, each naming the upstream file
(jax-ml/jax) it mirrors.

As in jax/__init__.py, cloud_tpu_init() runs first (it decides running_in_cloud_tpu_vm), and importing jax
imports jax._src.distributed, which imports jax._src.clusters: a launcher that hooks the import of
jax._src.clusters sees it happen during `import jax`.
"""
from jax._src.cloud_tpu_init import cloud_tpu_init as _cloud_tpu_init

_cloud_tpu_init()
del _cloud_tpu_init

from jax.version import __version__ as __version__  # noqa: E402
from jax._src import distributed as _src_distributed  # noqa: E402,F401  (imports jax._src.clusters)
from jax._src import xla_bridge as _xla_bridge  # noqa: E402
from jax import distributed as distributed  # noqa: E402


def process_index() -> int:
    """This process's id in the distributed job (0 before jax.distributed.initialize()). Like JAX, it
    creates the backends, after which jax.distributed.initialize() refuses to run (0.4.31 and later)."""
    return _xla_bridge.process_index()


def process_count() -> int:
    """The number of processes of the job (1 before jax.distributed.initialize()); creates the backends."""
    return _xla_bridge.process_count()
