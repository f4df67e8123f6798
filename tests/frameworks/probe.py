"""A worker that reports the distributed world the stand-in frameworks find: python probe.py MODE [ARGS].

MODE:
  jax        jax.distributed.initialize() with no arguments
  jax-named  jax.distributed.initialize(cluster_detection_method="distrun") where the JAX release has
             detection by name (0.4.31 and later); with 0.4.14 the plain call, reported as "named": false
  keras      keras.distribution.initialize() (set KERAS_BACKEND=jax)
  lightning  Lightning 2.x: lightning.fabric.connector.choose_cluster_environment()
  lightning1 PyTorch Lightning 1.x: choose_cluster_environment(DEVICES, NUM_NODES), from argv (default 1 1)

Prints one JSON line on stdout -- for jax/keras: mode, jax_version, coordinator, num_processes, process_id,
local_device_ids, cluster_env, all_ids (from the coordination service); for lightning: mode, environment,
world_size, global_rank, local_rank, node_rank, main_address, main_port -- plus distrun_rank
(DISTRUN_PROCESS_ID). On an exception: {"mode", "error": "ExcType: message", ...} and exit status 1.
"""
import json
import os
import sys


def _jax_world(doc):
    import jax
    from jax._src import distributed
    state = distributed.global_state
    doc.update(jax_version=jax.__version__, coordinator=state.coordinator_address,
               num_processes=state.num_processes, process_id=state.process_id,
               local_device_ids=state.local_device_ids, cluster_env=state.cluster_env,
               all_ids=state.client.all_ids if state.client is not None else None,
               process_index=jax.process_index(), process_count=jax.process_count())


def _environment(env, doc):
    doc.update(environment=type(env).__name__, world_size=env.world_size(), global_rank=env.global_rank(),
               local_rank=env.local_rank(), node_rank=env.node_rank(), main_address=env.main_address,
               main_port=env.main_port)


def run(mode, args, doc):
    if mode in ("jax", "jax-named"):
        import jax
        from jax._src import _standin
        doc["jax_version"] = jax.__version__
        try:
            if mode == "jax-named" and not _standin.OLD:
                jax.distributed.initialize(cluster_detection_method="distrun")
            else:
                if mode == "jax-named":
                    doc["named"] = False
                jax.distributed.initialize()
            _jax_world(doc)
        finally:
            jax.distributed.shutdown()
    elif mode == "keras":
        import keras
        try:
            keras.distribution.initialize()
            _jax_world(doc)
        finally:
            if "jax" in sys.modules:
                sys.modules["jax"].distributed.shutdown()
    elif mode == "lightning":
        from lightning.fabric.connector import choose_cluster_environment
        _environment(choose_cluster_environment(), doc)
    elif mode == "lightning1":
        import pytorch_lightning
        from pytorch_lightning.trainer.connectors.accelerator_connector import choose_cluster_environment
        devices = int(args[0]) if len(args) > 0 else 1
        num_nodes = int(args[1]) if len(args) > 1 else 1
        doc.update(pl_version=pytorch_lightning.__version__, devices=devices, num_nodes=num_nodes)
        _environment(choose_cluster_environment(devices, num_nodes), doc)
    else:
        raise ValueError(f"unknown mode {mode!r}; use jax, jax-named, keras, lightning or lightning1")


def main(argv):
    mode = argv[1] if len(argv) > 1 else ""
    doc = {"mode": mode, "distrun_rank": os.environ.get("DISTRUN_PROCESS_ID")}
    try:
        run(mode, argv[2:], doc)
    except BaseException as e:  # noqa: B902 -- report everything, including SystemExit from below
        doc["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(doc), flush=True)
        return 1
    print(json.dumps(doc), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
