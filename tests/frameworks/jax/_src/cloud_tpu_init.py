"""Stand-in for jax/_src/cloud_tpu_init.py (jax-ml/jax; same rule in 0.4.14, 0.4.31 and the newest sources).

`running_in_cloud_tpu_vm` is a module global that starts False and is set by `cloud_tpu_init()`, which
`jax/__init__.py` calls before anything else is imported. JAX sets it when `import libtpu` succeeds (newer
releases also require libtpu to see TPU chips); the stand-in stands that fact in with STANDIN_TPU_VM=1.

Note the consequence the real code has and the stand-in keeps: jax/_src/clusters/cluster.py and
cloud_tpu_cluster.py do `from jax._src.cloud_tpu_init import running_in_cloud_tpu_vm`, i.e. they copy the
value at their import, which happens after cloud_tpu_init() ran.
"""
import os

running_in_cloud_tpu_vm = False


def cloud_tpu_init():
    """Sets `running_in_cloud_tpu_vm` when the (stand-in) TPU runtime is present; safe elsewhere."""
    global running_in_cloud_tpu_vm
    if os.environ.get("STANDIN_TPU_VM") != "1":
        # JAX: `import libtpu` failed, so this is not a Cloud TPU VM; nothing else is done.
        return
    running_in_cloud_tpu_vm = True
    # What JAX does next on a TPU VM, minus libtpu's library path.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("JAX_PLATFORMS", "tpu,cpu")
    os.environ["TPU_ML_PLATFORM"] = "JAX"
