"""Keras 3 under distrun: keras.distribution.initialize() with no arguments, then a data-parallel fit.

    distrun -- python3 examples/keras_env.py

keras.distribution.initialize() reads KERAS_DISTRIBUTION_JOB_ADDRESSES, KERAS_DISTRIBUTION_NUM_PROCESSES
and KERAS_DISTRIBUTION_PROCESS_ID, which distrun sets for every worker, and starts JAX's distributed
runtime with them. Keras distributes only with the JAX backend.
"""
import os
import sys

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402  (the backend is chosen before the import)
import numpy as np  # noqa: E402


def main():
    keras.distribution.initialize()
    devices = keras.distribution.list_devices()
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))

    # y = 3x + 1, learned by every worker on its share of each global batch.
    x = np.linspace(-1, 1, 256, dtype="float32").reshape(-1, 1)
    y = 3 * x + 1
    model = keras.Sequential([keras.Input(shape=(1,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5), loss="mse")
    history = model.fit(x, y, batch_size=64, epochs=20, verbose=0)
    loss = history.history["loss"][-1]
    print(f"process {os.environ['KERAS_DISTRIBUTION_PROCESS_ID']}/{os.environ['KERAS_DISTRIBUTION_NUM_PROCESSES']}:"
          f" {len(devices)} devices in the data-parallel mesh, final loss {loss:.2e}", flush=True)
    return 0 if loss < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main())
