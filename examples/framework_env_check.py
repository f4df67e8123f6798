"""Prints, as one JSON line, the arguments that jax.distributed.initialize() and Keras 3's
keras.distribution.initialize() would use in this worker, derived exactly from the variables distrun sets,
so a test can check that every framework would join the same job with consistent ids.

Keras 3 (keras/src/distribution/distribution_lib.py): job_addresses from KERAS_DISTRIBUTION_JOB_ADDRESSES
(a comma list must have num_processes entries; the first is the coordinator), num_processes from
KERAS_DISTRIBUTION_NUM_PROCESSES, process_id from KERAS_DISTRIBUTION_PROCESS_ID; it then calls
jax.distributed.initialize(coordinator, num_processes, process_id).
JAX has no variables for count and id; distrun's documented call is
jax.distributed.initialize(JAX_COORDINATOR_ADDRESS, DISTRUN_NUM_PROCESSES, DISTRUN_PROCESS_ID).
"""
import json
import os


def keras_arguments(env):
    addresses = env["KERAS_DISTRIBUTION_JOB_ADDRESSES"]
    num = int(env["KERAS_DISTRIBUTION_NUM_PROCESSES"])
    pid = int(env["KERAS_DISTRIBUTION_PROCESS_ID"])
    if "," in addresses:
        addresses = addresses.split(",")
        if len(addresses) != num:
            raise ValueError("Keras: job_addresses count differs from num_processes")
        coordinator = addresses[0]
    else:
        coordinator = addresses
    return {"coordinator": coordinator, "num_processes": num, "process_id": pid}


def jax_arguments(env):
    return {"coordinator": env["JAX_COORDINATOR_ADDRESS"], "num_processes": int(env["DISTRUN_NUM_PROCESSES"]),
            "process_id": int(env["DISTRUN_PROCESS_ID"])}


def torch_arguments(env):
    return {"master": f'{env["MASTER_ADDR"]}:{env["MASTER_PORT"]}', "world_size": int(env["WORLD_SIZE"]),
            "rank": int(env["RANK"]), "local_rank": int(env["LOCAL_RANK"])}


if __name__ == "__main__":
    env = dict(os.environ)
    print(json.dumps({"keras": keras_arguments(env), "jax": jax_arguments(env), "torch": torch_arguments(env)}),
          flush=True)
