"""A stand-in Keras 3 for tests: only keras.distribution.initialize() and the backend choice behind it.

Mirrors keras-team/keras (commit 015139f, unchanged in 1c70a85): keras/src/backend/config.py (the backend),
keras/src/backend/__init__.py (what each backend provides as `distribution_lib`),
keras/src/distribution/distribution_lib.py (initialize) and keras/src/backend/jax/distribution_lib.py
(initialize). Put tests/frameworks on PYTHONPATH; the JAX backend uses the stand-in JAX beside this package.
"""
from keras.src.backend.config import backend as _backend  # noqa: F401
from keras.src import backend as _backend_module  # noqa: F401  (imports the backend, as Keras does)
from keras import distribution as distribution  # noqa: E402

__version__ = "3.10.0"
