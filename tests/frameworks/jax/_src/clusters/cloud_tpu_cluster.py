"""Stand-in for jax/_src/clusters/cloud_tpu_cluster.py (jax-ml/jax).

Every generation reaches the GCE metadata server as JAX does: GET
http://$GCE_METADATA_IP/computeMetadata/v1/instance/attributes/<key> (GCE_METADATA_IP defaults to
metadata.google.internal and may carry a port) with "Metadata-Flavor: Google", up to 6 tries 0.5 s apart
while the answer is not 200; a connection error propagates (JAX uses `requests`, the stand-in urllib and
raises ConnectionError).

* 0.4.14 (jax-ml/jax@004b8c1): TpuCluster, present when running_in_cloud_tpu_vm. Coordinator: the third
  ':' field of the first entry of metadata 'worker-network-endpoints', port 8476; count:
  xla_bridge.process_count() (libtpu's view; STANDIN_TPU_PROCESS_COUNT in the stand-in); id: metadata
  'agent-worker-number', after checking that count equals the number of endpoints.
* 0.4.31 (jax-ml/jax cloud_tpu_cluster.py with BaseTpuCluster, mid-2024): BaseTpuCluster ("tpu", never
  present), GceTpuCluster ("gcetpu": TPU VM, TPU_SKIP_MDS_QUERY unset, and metadata 'agent-worker-number'
  answers 200), GkeTpuCluster ("gketpu": TPU VM and TPU_WORKER_HOSTNAMES set; id TPU_WORKER_ID). Defined in
  that order, so they register Base, Gce, Gke whatever order clusters/__init__.py names them in.
  Multislice when MEGASCALE_COORDINATOR_ADDRESS is known (environment first, else metadata 'tpu-env'):
  coordinator = that host, count = workers per slice * MEGASCALE_NUM_SLICES, id = id in slice +
  MEGASCALE_SLICE_ID * workers per slice; single slice otherwise: coordinator = first worker. The
  coordinator's name must resolve (socket.gethostbyname, retried every 5 s until timeout_secs); port 8476.
* newest (tests/cloud_tpu_cluster_test.py of 2026): GKE workers come from TPU_PROCESS_ADDRESSES_PATH (a file;
  unreadable -> RuntimeError "Failed to read TPU process addresses file", blank -> ValueError "TPU process
  addresses file is empty"; an empty variable is ignored), else TPU_PROCESS_ADDRESSES, else
  TPU_WORKER_HOSTNAMES; TPU_SKIP_MDS_QUERY=true makes get_tpu_env_value() answer None instead of asking
  the metadata server; JAX_COORDINATOR_PORT replaces 8476.
"""
from __future__ import annotations

import logging
import os
import socket
import time

from jax._src import _standin
from jax._src import clusters
from jax._src import xla_bridge
from jax._src.cloud_tpu_init import running_in_cloud_tpu_vm

logger = logging.getLogger(__name__)

# Arbitrary fixed port: there is no way to agree on one at run time.
coordinator_port = '8476'
metadata_response_code_success = 200


def _fetch(key):
    """(text, status) of one GET of the metadata attribute `key`."""
    import urllib.error
    import urllib.request
    endpoint = 'http://' + os.environ.get('GCE_METADATA_IP', 'metadata.google.internal')
    request = urllib.request.Request(f'{endpoint}/computeMetadata/v1/instance/attributes/{key}',
                                     headers={'Metadata-Flavor': 'Google'})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.read().decode(), response.status
    except urllib.error.HTTPError as e:
        return e.read().decode(errors='replace'), e.code
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, 'reason', e)
        raise ConnectionError(f"metadata server {endpoint} unreachable for '{key}': {reason}") from None


def _get(key):
    text, status = None, None
    for attempt in range(6):
        text, status = _fetch(key)
        if status == 200:
            break
        time.sleep(0.5)
    return text, status


if _standin.OLD:
    def get_metadata(key):
        return _get(key)[0]

    class TpuCluster(clusters.ClusterEnv):
        @classmethod
        def is_env_present(cls) -> bool:
            return running_in_cloud_tpu_vm

        @classmethod
        def get_coordinator_address(cls) -> str:
            return cls._get_worker_endpoints()[0].split(':')[2] + ':8476'

        @classmethod
        def get_process_count(cls) -> int:
            return xla_bridge.process_count()

        @classmethod
        def get_process_id(cls) -> int:
            if cls.get_process_count() != len(cls._get_worker_endpoints()):
                raise RuntimeError('Number of workers does not equal the number of '
                                   'processes. Auto detecting process_id is not possible.'
                                   'Please pass process_id to jax.distributed.initialize() manually.')
            return int(get_metadata('agent-worker-number'))

        @classmethod
        def get_local_process_id(cls):
            return None

        @staticmethod
        def _get_worker_endpoints():
            return get_metadata('worker-network-endpoints').split(',')

else:
    def get_metadata(key):
        return _get(key)

    def get_tpu_env_value_from_metadata(key):
        """The value of `key` in metadata 'tpu-env' (lines like "MEGASCALE_NUM_SLICES: '2'"), or None."""
        found = None
        for line in get_metadata('tpu-env')[0].split('\n'):
            if ':' in line:
                row_key, value = line.split(':', 1)
                if row_key.strip() == key:
                    found = value.strip().strip("'")
                    if not _standin.NEW:
                        return found
        return found

    def get_tpu_env_value(key):
        value = os.environ.get(key)
        if value is not None:
            return value
        if _standin.NEW and os.environ.get('TPU_SKIP_MDS_QUERY', '').lower() == 'true':
            return None
        return get_tpu_env_value_from_metadata(key)

    def has_megascale_address():
        return get_tpu_env_value('MEGASCALE_COORDINATOR_ADDRESS') is not None

    class BaseTpuCluster(clusters.ClusterEnv):
        """Single and multislice TPU environments; subclasses list the workers of a slice and the id in it."""

        name: str = "tpu"

        @classmethod
        def is_env_present(cls) -> bool:
            return False

        @classmethod
        def _coordinator(cls, timeout_secs, port):
            if has_megascale_address():
                # Process 0 of the whole job hosts Megascale's coordinator too (QueuedResources, JobSet).
                host = get_tpu_env_value('MEGASCALE_COORDINATOR_ADDRESS')
            else:
                # Workers are listed in process-id order.
                host = cls._get_worker_list_in_slice()[0]
            host = host.split(':')[0]
            logger.debug("TPU Cluster using coordinator address: %s", host)
            cls.wait_for_coordinator(host, timeout_secs)
            return f'{host}:{port}'

        if _standin.MID:
            @classmethod
            def get_coordinator_address(cls, timeout_secs) -> str:
                return cls._coordinator(timeout_secs, coordinator_port)
        else:
            @classmethod
            def get_coordinator_address(cls, timeout_secs, override_coordinator_port) -> str:
                return cls._coordinator(timeout_secs, override_coordinator_port or coordinator_port)

        @classmethod
        def wait_for_coordinator(cls, coordinator_address, timeout_secs):
            # The coordinator's name may not resolve yet when the other hosts start.
            deadline = time.time() + timeout_secs
            while time.time() < deadline:
                try:
                    socket.gethostbyname(coordinator_address)
                    return
                except socket.gaierror:
                    time.sleep(5)
            raise RuntimeError(f"Failed to recognize coordinator address {coordinator_address}")

        @classmethod
        def get_process_count(cls) -> int:
            return len(cls._get_worker_list_in_slice()) * cls._get_num_slices()

        @classmethod
        def get_process_id(cls) -> int:
            per_slice = len(cls._get_worker_list_in_slice())
            return cls._get_process_id_in_slice() + cls._get_slice_id() * per_slice

        @staticmethod
        def _get_num_slices() -> int:
            return int(get_tpu_env_value('MEGASCALE_NUM_SLICES')) if has_megascale_address() else 1

        @staticmethod
        def _get_slice_id() -> int:
            return int(get_tpu_env_value('MEGASCALE_SLICE_ID')) if has_megascale_address() else 0

        @staticmethod
        def _get_process_id_in_slice() -> int:
            raise NotImplementedError()

        @staticmethod
        def _get_worker_list_in_slice():
            raise NotImplementedError()

    class GceTpuCluster(BaseTpuCluster):
        name: str = "gcetpu"

        @classmethod
        def is_env_present(cls) -> bool:
            if not running_in_cloud_tpu_vm:
                return False
            if os.environ.get("TPU_SKIP_MDS_QUERY") is not None:
                # Probably not a GCE TPU VM (GKE sets it).
                return False
            return get_metadata('agent-worker-number')[1] == metadata_response_code_success

        @staticmethod
        def _get_process_id_in_slice() -> int:
            return int(get_metadata('agent-worker-number')[0])

        @staticmethod
        def _get_worker_list_in_slice():
            return [worker.split(':')[2] for worker in get_metadata('worker-network-endpoints')[0].split(',')]

    class GkeTpuCluster(BaseTpuCluster):
        name: str = "gketpu"

        if _standin.MID:
            @staticmethod
            def _get_worker_host_names_env_var():
                return os.environ.get('TPU_WORKER_HOSTNAMES')
        else:
            @staticmethod
            def _get_worker_host_names_env_var():
                path = os.environ.get('TPU_PROCESS_ADDRESSES_PATH')
                if path:
                    try:
                        with open(path) as f:
                            text = f.read().strip()
                    except OSError as e:
                        raise RuntimeError(f'Failed to read TPU process addresses file {path}: {e}') from e
                    if not text:
                        raise ValueError(f'TPU process addresses file is empty: {path}')
                    return text
                if os.environ.get('TPU_PROCESS_ADDRESSES') is not None:
                    return os.environ['TPU_PROCESS_ADDRESSES']
                return os.environ.get('TPU_WORKER_HOSTNAMES')

        @classmethod
        def is_env_present(cls) -> bool:
            return running_in_cloud_tpu_vm and cls._get_worker_host_names_env_var() is not None

        @staticmethod
        def _get_process_id_in_slice() -> int:
            return int(str(os.environ.get('TPU_WORKER_ID')))

        @classmethod
        def _get_worker_list_in_slice(cls):
            return str(cls._get_worker_host_names_env_var()).split(',')
