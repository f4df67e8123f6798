"""Stand-in for keras/src/backend/jax/distribution_lib.py (keras-team/keras@015139f, same in 1c70a85).

initialize(job_addresses, num_processes, process_id): with a comma in job_addresses, the list is split, its
length must equal num_processes when that is given (ValueError "The provided job_addresses [...] has N jobs,
but num_processes is M"), and the first entry is the coordinator; otherwise job_addresses itself (possibly
None) is. Then jax.distributed.initialize(coordinator_address=..., num_processes=..., process_id=...) --
Keras passes no local_device_ids, so JAX's own defaults and detection fill the rest.
"""
import jax


def list_devices(device_type=None):
    raise NotImplementedError("stand-in keras: devices are not modelled")


def initialize(job_addresses, num_processes, process_id):
    coordinator_address = job_addresses
    if job_addresses and "," in job_addresses:
        addresses = job_addresses.split(",")
        if num_processes is not None and num_processes != len(addresses):
            raise ValueError(f"The provided job_addresses {addresses} has {len(addresses)} jobs, but "
                             f"num_processes is {num_processes}")
        coordinator_address = addresses[0]  # job 0 is the coordinator
    jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                               process_id=process_id)


def num_processes():
    """The number of processes of the distribution."""
    return jax.process_count()


def process_id():
    """This process's id in the distribution."""
    return jax.process_index()
