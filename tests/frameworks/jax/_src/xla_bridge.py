"""Stand-in for the two parts of jax/_src/xla_bridge.py that cluster detection touches.

* `process_count()`: in JAX it creates the backends and asks the default one. The 0.4.14 TpuCluster calls
  it before jax.distributed.initialize() to learn the slice's process count from libtpu. The stand-in's
  "libtpu" reports STANDIN_TPU_PROCESS_COUNT (default 1) on a TPU VM (STANDIN_TPU_VM=1); elsewhere, and
  after initialize(), it reports the distributed world like JAX's CPU/GPU backends.
* `backends_are_initialized()`: whether something already created the backends (jax.process_index(),
  jax.process_count(), jax.devices()...), which jax.distributed.initialize() refuses from 0.4.2x on.
"""
import os

_backends_initialized = False


def _initialize_backends():
    global _backends_initialized
    _backends_initialized = True


def backends_are_initialized():
    return _backends_initialized


def process_count():
    _initialize_backends()
    from jax._src import distributed
    if distributed.global_state.client is None and os.environ.get("STANDIN_TPU_VM") == "1":
        return int(os.environ.get("STANDIN_TPU_PROCESS_COUNT", "1"))
    return distributed.global_state.num_processes


def process_index():
    _initialize_backends()
    from jax._src import distributed
    return distributed.global_state.process_id
