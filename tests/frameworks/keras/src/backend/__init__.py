"""Stand-in for keras/src/backend/__init__.py, reduced to `distribution_lib`.

As Keras: "jax" gives keras.src.backend.jax.distribution_lib; "tensorflow" and "torch" import their framework
first (here, as usually on this machine, that import fails with ModuleNotFoundError and so does
`import keras`); "numpy" and "openvino" have distribution_lib = None, so keras.distribution.initialize() fails
with AttributeError; any other name raises ValueError("Unable to import backend : <name>").
"""
from keras.src.backend.config import backend

if backend() == "jax":
    from keras.src.backend.jax import distribution_lib
elif backend() == "tensorflow":
    import tensorflow  # noqa: F401
    raise ImportError("stand-in keras: the TensorFlow backend is not modelled (its distribution_lib has no "
                      "initialize(), so keras.distribution.initialize() raises AttributeError there)")
elif backend() == "torch":
    import torch  # noqa: F401
    raise ImportError("stand-in keras: the torch backend's distribution_lib (torch.distributed) is not modelled")
elif backend() in ("numpy", "openvino"):
    distribution_lib = None
else:
    raise ValueError(f"Unable to import backend : {backend()}")
