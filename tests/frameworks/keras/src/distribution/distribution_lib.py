"""Stand-in for keras/src/distribution/distribution_lib.py, reduced to initialize() and list_devices()
(keras-team/keras@015139f).

initialize(job_addresses=None, num_processes=None, process_id=None): each argument left None is read from
KERAS_DISTRIBUTION_JOB_ADDRESSES (string), KERAS_DISTRIBUTION_NUM_PROCESSES (int) and
KERAS_DISTRIBUTION_PROCESS_ID (int) when set, then handed to the backend's distribution_lib.initialize().
"""
import os

from keras.src.backend import distribution_lib


def list_devices(device_type=None):
    return distribution_lib.list_devices(device_type)


def initialize(job_addresses=None, num_processes=None, process_id=None):
    """Initialize the distribution system for multi-host/process setting (see the module docstring)."""
    if job_addresses is None and "KERAS_DISTRIBUTION_JOB_ADDRESSES" in os.environ:
        job_addresses = os.environ["KERAS_DISTRIBUTION_JOB_ADDRESSES"]
    if num_processes is None and "KERAS_DISTRIBUTION_NUM_PROCESSES" in os.environ:
        num_processes = int(os.environ["KERAS_DISTRIBUTION_NUM_PROCESSES"])
    if process_id is None and "KERAS_DISTRIBUTION_PROCESS_ID" in os.environ:
        process_id = int(os.environ["KERAS_DISTRIBUTION_PROCESS_ID"])
    distribution_lib.initialize(job_addresses, num_processes, process_id)
