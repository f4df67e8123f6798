"""Stand-in for jax/_src/distributed.py (jax-ml/jax): State.initialize() and the public initialize().

What each generation does before the service starts (see jax/_src/_standin.py for the generations):

* 0.4.14 (the jax_coordination_service era, e.g. the copy with `init_timeout=300`): coordinator_address
  defaults to JAX_COORDINATOR_ADDRESS; an int local_device_ids becomes a list; auto-detection always runs
  (ClusterEnv returns early when all four values are given); then ValueError "coordinator_address should
  be defined." / "Number of processes must be defined." / "The process id of the current process must be
  defined."; process 0 starts the service on the coordinator address itself; every client waits 300 s.
  initialize() has no initialization_timeout and registers shutdown() with atexit.
* 0.4.31 (jax-ml/jax@01f4709 with the rename of spec_detection_method to cluster_detection_method):
  initialize(coordinator_address, num_processes, process_id, local_device_ids, cluster_detection_method,
  initialization_timeout=300, coordinator_bind_address); refuses to run once the backends exist; process 0
  binds coordinator_bind_address, else JAX_COORDINATOR_BIND_ADDRESS, else "[::]:<coordinator port>";
  proxy variables are warned about; shutdown() registered with atexit.
* newest (the 2025-26 sources): local_device_ids defaults to JAX_LOCAL_DEVICE_IDS ("0,1" -> [0, 1]);
  detection runs only when cluster_detection_method != "deactivate" and one of the four values is missing;
  TypeError for a process_id / num_processes that is not an int, ValueError unless 0 <= process_id <
  num_processes; heartbeat/shutdown timeouts, partition_index and the mTLS files are accepted (the stand-in
  ignores them); no atexit; is_initialized().

In every generation a second initialize() raises RuntimeError("distributed.initialize should only be called
once.") -- from the service check on process 0, from the client check elsewhere.

Stand-in extras on `global_state`: `local_device_ids` (what JAX would make visible), `cluster_env` (the
__name__ of the ClusterEnv class detection chose, or None) and `client.all_ids` (the process ids the
coordination service answered with).
"""
from __future__ import annotations

import atexit
import logging
import os

from jax._src import _standin
from jax._src import clusters
from jax._src import xla_bridge
from jax._src.lib import xla_extension

logger = logging.getLogger(__name__)


class State:
    process_id: int = 0
    num_processes: int = 1
    service = None
    client = None
    preemption_sync_manager = None
    coordinator_address = None
    partition_index = None
    # stand-in extras
    local_device_ids = None
    cluster_env = None

    def _detect(self, *args):
        clusters.ClusterEnv._standin_chosen = None
        found = clusters.ClusterEnv.auto_detect_unset_distributed_params(*args)
        chosen = clusters.ClusterEnv._standin_chosen
        self.cluster_env = chosen.__name__ if chosen is not None else None
        return found

    @staticmethod
    def _require(coordinator_address, num_processes, process_id):
        if coordinator_address is None:
            raise ValueError('coordinator_address should be defined.')
        if num_processes is None:
            raise ValueError('Number of processes must be defined.')
        if process_id is None:
            raise ValueError('The process id of the current process must be defined.')

    @staticmethod
    def _bind_address(coordinator_address, coordinator_bind_address):
        # The default "[::]:port" binds every address on the coordinator's port.
        default = '[::]:' + coordinator_address.rsplit(':', 1)[1]
        return coordinator_bind_address or os.environ.get('JAX_COORDINATOR_BIND_ADDRESS', default)

    def _start(self, coordinator_address, num_processes, process_id, local_device_ids, bind_address,
               init_timeout):
        self.coordinator_address = coordinator_address
        self.local_device_ids = list(local_device_ids) if local_device_ids else local_device_ids
        if local_device_ids:
            # JAX sets jax_cuda_visible_devices / jax_rocm_visible_devices here.
            logger.info('JAX distributed initialized with visible devices: %s',
                        ','.join(str(x) for x in local_device_ids))
        self.process_id = process_id
        if not _standin.OLD:
            proxy_vars = [key for key in os.environ if '_proxy' in key.lower()]
            if proxy_vars:
                logger.warning('JAX detected proxy variable(s) in the environment as distributed setup: %s. '
                               'On some systems, this may cause a hang of distributed.initialize and you may '
                               'need to unset these ENV variable(s)', ' '.join(proxy_vars))
        if process_id == 0:
            if self.service is not None:
                raise RuntimeError('distributed.initialize should only be called once.')
            logger.info('Starting JAX distributed service on %s', bind_address)
            self.service = xla_extension.get_distributed_runtime_service(bind_address, num_processes)
        self.num_processes = num_processes
        if self.client is not None:
            raise RuntimeError('distributed.initialize should only be called once.')
        self.client = xla_extension.get_distributed_runtime_client(
            coordinator_address, process_id, init_timeout=init_timeout, standin_num_processes=num_processes)
        logger.info('Connecting to JAX distributed service on %s', coordinator_address)
        self.client.connect()

    if _standin.OLD:
        def initialize(self, coordinator_address=None, num_processes=None, process_id=None,
                       local_device_ids=None):
            coordinator_address = coordinator_address or os.environ.get('JAX_COORDINATOR_ADDRESS', None)
            if isinstance(local_device_ids, int):
                local_device_ids = [local_device_ids]
            (coordinator_address, num_processes, process_id, local_device_ids) = self._detect(
                coordinator_address, num_processes, process_id, local_device_ids)
            self._require(coordinator_address, num_processes, process_id)
            # No bind address yet: the service listens on the coordinator address; clients wait 5 minutes.
            self._start(coordinator_address, num_processes, process_id, local_device_ids,
                        coordinator_address, 300)

    elif _standin.MID:
        def initialize(self, coordinator_address=None, num_processes=None, process_id=None,
                       local_device_ids=None, cluster_detection_method=None, initialization_timeout=300,
                       coordinator_bind_address=None):
            coordinator_address = coordinator_address or os.environ.get('JAX_COORDINATOR_ADDRESS', None)
            if isinstance(local_device_ids, int):
                local_device_ids = [local_device_ids]
            (coordinator_address, num_processes, process_id, local_device_ids) = self._detect(
                coordinator_address, num_processes, process_id, local_device_ids, cluster_detection_method,
                initialization_timeout)
            self._require(coordinator_address, num_processes, process_id)
            self._start(coordinator_address, num_processes, process_id, local_device_ids,
                        self._bind_address(coordinator_address, coordinator_bind_address),
                        initialization_timeout)

    else:
        def initialize(self, coordinator_address=None, num_processes=None, process_id=None,
                       local_device_ids=None, cluster_detection_method=None, initialization_timeout=300,
                       coordinator_bind_address=None, heartbeat_timeout_seconds=100,
                       shutdown_timeout_seconds=300, partition_index=None):
            coordinator_address = coordinator_address or os.environ.get('JAX_COORDINATOR_ADDRESS')
            if isinstance(local_device_ids, int):
                local_device_ids = [local_device_ids]
            env_ids = os.environ.get('JAX_LOCAL_DEVICE_IDS')
            if local_device_ids is None and env_ids:
                local_device_ids = list(map(int, env_ids.split(",")))
            self.cluster_env = None
            if (cluster_detection_method != 'deactivate' and
                    None in (coordinator_address, num_processes, process_id, local_device_ids)):
                (coordinator_address, num_processes, process_id, local_device_ids) = self._detect(
                    coordinator_address, num_processes, process_id, local_device_ids, cluster_detection_method,
                    initialization_timeout)
            self._require(coordinator_address, num_processes, process_id)
            if not isinstance(process_id, int):
                raise TypeError("process_id must be a nonnegative int. "
                                f"Got process_id={process_id} of type {type(process_id)}.")
            if not isinstance(num_processes, int):
                raise TypeError("num_processes must be a positive int. "
                                f"Got num_processes={num_processes} of type {type(num_processes)}.")
            if not (0 <= process_id < num_processes):
                raise ValueError("process_id and num_processes must be nonnegative, with process_id < "
                                 f"num_processes. Got process_id={process_id}, num_processes={num_processes}.")
            self._start(coordinator_address, num_processes, process_id, local_device_ids,
                        self._bind_address(coordinator_address, coordinator_bind_address),
                        initialization_timeout)
            if partition_index is None:
                if os.environ.get('JAX_PARTITION_INDEX') is not None:
                    partition_index = int(os.environ['JAX_PARTITION_INDEX'])
                elif os.environ.get('JAX_SLICE_INDEX') is not None:
                    partition_index = int(os.environ['JAX_SLICE_INDEX'])
            self.partition_index = partition_index

    def shutdown(self):
        self.preemption_sync_manager = None
        if self.client:
            self.client.shutdown()
            self.client = None
        if self.service:
            self.service.shutdown()
            self.service = None


global_state = State()


def _backends_guard():
    if xla_bridge.backends_are_initialized():
        if _standin.MID:
            raise RuntimeError("jax.distributed.initialize() must be called before "
                               "any JAX computations are executed.")
        raise RuntimeError("jax.distributed.initialize() must be called before "
                           "any JAX calls that might initialise the XLA backend. "
                           "This includes any computation, but also calls to jax.devices, jax.device_put, and "
                           "others.")


if _standin.OLD:
    def initialize(coordinator_address=None, num_processes=None, process_id=None, local_device_ids=None):
        """Initializes the JAX distributed system (stand-in of JAX 0.4.14)."""
        global_state.initialize(coordinator_address, num_processes, process_id, local_device_ids)
        atexit.register(shutdown)

elif _standin.MID:
    def initialize(coordinator_address=None, num_processes=None, process_id=None, local_device_ids=None,
                   cluster_detection_method=None, initialization_timeout=300, coordinator_bind_address=None):
        """Initializes the JAX distributed system (stand-in of JAX 0.4.31)."""
        _backends_guard()
        global_state.initialize(coordinator_address, num_processes, process_id, local_device_ids,
                                cluster_detection_method, initialization_timeout, coordinator_bind_address)
        atexit.register(shutdown)

else:
    def initialize(coordinator_address=None, num_processes=None, process_id=None, local_device_ids=None,
                   cluster_detection_method=None, initialization_timeout=300, heartbeat_timeout_seconds=100,
                   shutdown_timeout_seconds=300, coordinator_bind_address=None, slice_index=None,
                   partition_index=None, mtls_cert_file=None, mtls_key_file=None, mtls_ca_file=None,
                   verify_secure_credentials=None):
        """Initializes the JAX distributed system (stand-in of the newest JAX sources)."""
        _backends_guard()
        if partition_index is None:
            partition_index = slice_index
        global_state.initialize(coordinator_address, num_processes, process_id, local_device_ids,
                                cluster_detection_method, initialization_timeout, coordinator_bind_address,
                                heartbeat_timeout_seconds=heartbeat_timeout_seconds,
                                shutdown_timeout_seconds=shutdown_timeout_seconds,
                                partition_index=partition_index)

    def is_initialized() -> bool:
        """Whether the JAX distributed system is initialized."""
        return global_state.client is not None


def shutdown():
    """Shuts down the distributed system. Does nothing if it is not running."""
    global_state.shutdown()
