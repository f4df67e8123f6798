"""Stand-in for jax/_src/clusters/cluster.py (jax-ml/jax).

Mirrors, per generation (see jax/_src/_standin.py):

* 0.4.14 (jax-ml/jax cluster.py of mid-2023, e.g. superbobry/jax@340498c): auto_detect_unset_distributed_params(
  coordinator_address, num_processes, process_id, local_device_ids); returns at once when all four are given;
  otherwise the first class of `_cluster_types` whose is_env_present() is true; get_coordinator_address() is
  called with no argument.
* 0.4.31 (jax-ml/jax@0d57c72): adds cluster_detection_method and initialization_timeout; a named method picks
  the class whose `name` matches (logging an error when there is none or it is not present, and still using a
  class that is named but not present); otherwise the first class that is not `opt_in_only_method` and is
  present; get_coordinator_address(timeout_secs=initialization_timeout).
* newest (jax-ml/jax main, 2025-26): the "all four given" shortcut moved to distributed.py, and
  get_coordinator_address(timeout_secs=..., override_coordinator_port=os.environ.get("JAX_COORDINATOR_PORT")).

In every generation: subclasses register themselves in `ClusterEnv._cluster_types` from __init_subclass__,
i.e. in the order their class statements run (import order); local_device_ids is filled with
[get_local_process_id()] only when it was not given and `running_in_cloud_tpu_vm` is false -- the value
copied when this module was imported. ClusterEnv itself defines no `name` (the classes define theirs).

Stand-in extra: `ClusterEnv._standin_chosen` records the class detection chose (or None) for
jax._src.distributed.global_state.cluster_env.
"""
from __future__ import annotations

import logging
import os

from jax._src import _standin
from jax._src.cloud_tpu_init import running_in_cloud_tpu_vm

logger = logging.getLogger(__name__)


def _fill(env, coordinator_address, num_processes, process_id, local_device_ids, *coordinator_args, **kw):
    logger.debug('Initializing distributed JAX environment via %s', env.__name__)
    if coordinator_address is None:
        coordinator_address = env.get_coordinator_address(*coordinator_args, **kw)
    if num_processes is None:
        num_processes = env.get_process_count()
    if process_id is None:
        process_id = env.get_process_id()
    # Never automatically set local_device_ids on TPUs (JAX's rule: one device per process only where the
    # cluster knows a local process id, and never on a Cloud TPU VM).
    if (local_device_ids is None and not running_in_cloud_tpu_vm and
            env.get_local_process_id() is not None):
        local_device_ids = [env.get_local_process_id()]
    return coordinator_address, num_processes, process_id, local_device_ids


def _named(cls, cluster_detection_method):
    # As JAX: a class without a `name` attribute met before the match raises AttributeError.
    env = next((env for env in cls._cluster_types if env.name == cluster_detection_method), None)
    if env is None:
        logger.error(f"Automatic Distributed initialization can not proceed:"
                     f" {cluster_detection_method} is not supported.")
    elif not env.is_env_present():
        logger.error(f"Automatic Distributed initialization can not proceed:"
                     f" {cluster_detection_method} is supported but not functional in this environment.")
    return env


def _not_found(cls):
    logger.debug('Could not find a known environment for initializing distributed JAX. '
                 'Known environments: %s', ', '.join(e.__name__ for e in cls._cluster_types))


class ClusterEnv:
    """Interface for defining a cluster environment.

    To enable auto bootstrapping (aka :func:`jax.distributed.initialize()`), cluster environments derive
    from :class:`ClusterEnv` and implement is_env_present, get_coordinator_address, get_process_count and
    get_process_id. Subclasses are automatically detected when imported.
    """

    _cluster_types: list = []
    _standin_chosen = None

    if not _standin.OLD:
        opt_in_only_method: bool = False  # Override this in derived classes if necessary
    if _standin.NEW:
        name: str  # declared (typing only, no value) in the newest sources; each class sets its own

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._cluster_types.append(cls)

    if _standin.OLD:
        @classmethod
        def auto_detect_unset_distributed_params(cls, coordinator_address, num_processes, process_id,
                                                 local_device_ids):
            if all(p is not None for p in (coordinator_address, num_processes, process_id, local_device_ids)):
                return (coordinator_address, num_processes, process_id, local_device_ids)
            env = next((env for env in cls._cluster_types if env.is_env_present()), None)
            ClusterEnv._standin_chosen = env
            if env:
                return _fill(env, coordinator_address, num_processes, process_id, local_device_ids)
            _not_found(cls)
            return (coordinator_address, num_processes, process_id, local_device_ids)

    elif _standin.MID:
        @classmethod
        def auto_detect_unset_distributed_params(cls, coordinator_address, num_processes, process_id,
                                                 local_device_ids, cluster_detection_method,
                                                 initialization_timeout):
            if all(p is not None for p in (coordinator_address, num_processes, process_id, local_device_ids)):
                return (coordinator_address, num_processes, process_id, local_device_ids)
            if cluster_detection_method is not None:
                env = _named(cls, cluster_detection_method)
            else:
                env = next((env for env in cls._cluster_types
                            if env.opt_in_only_method == False and env.is_env_present()), None)  # noqa: E712
            ClusterEnv._standin_chosen = env
            if env:
                return _fill(env, coordinator_address, num_processes, process_id, local_device_ids,
                             timeout_secs=initialization_timeout)
            _not_found(cls)
            return (coordinator_address, num_processes, process_id, local_device_ids)

    else:
        @classmethod
        def auto_detect_unset_distributed_params(cls, coordinator_address, num_processes, process_id,
                                                 local_device_ids, cluster_detection_method,
                                                 initialization_timeout):
            if cluster_detection_method is not None:
                env = _named(cls, cluster_detection_method)
            else:
                env = next((env for env in cls._cluster_types
                            if env.opt_in_only_method == False and env.is_env_present()), None)  # noqa: E712
            ClusterEnv._standin_chosen = env
            if env:
                return _fill(env, coordinator_address, num_processes, process_id, local_device_ids,
                             timeout_secs=initialization_timeout,
                             override_coordinator_port=os.environ.get("JAX_COORDINATOR_PORT"))
            _not_found(cls)
            return (coordinator_address, num_processes, process_id, local_device_ids)

    @classmethod
    def is_env_present(cls) -> bool:
        """Returns True if process is running in this cluster environment."""
        raise NotImplementedError("ClusterEnv subclasses must implement is_env_present")

    @classmethod
    def get_coordinator_address(cls, *args, **kwargs) -> str:
        """Returns "hostname:port" where process 0 opens the service; the same on every process.

        0.4.14 calls it with no argument, 0.4.31 with timeout_secs, the newest sources with timeout_secs and
        override_coordinator_port."""
        raise NotImplementedError("ClusterEnv subclasses must implement get_coordinator_address")

    @classmethod
    def get_process_count(cls) -> int:
        raise NotImplementedError("ClusterEnv subclasses must implement get_process_count")

    @classmethod
    def get_process_id(cls) -> int:
        raise NotImplementedError("ClusterEnv subclasses must implement get_process_id")

    @classmethod
    def get_local_process_id(cls):
        """Index of this process inside its host, or None (JAX then leaves the visible devices alone)."""
        return None
