"""Stand-in for keras/src/backend/config.py, reduced to the backend choice.

As Keras: the default is "tensorflow"; $KERAS_HOME/keras.json (KERAS_HOME, else ~/.keras, or /tmp/.keras when
the home directory is not writable) may name another with "backend"; a non-empty KERAS_BACKEND wins over
both. Keras also writes a default keras.json when there is none; the stand-in only reads it.
"""
import json
import os

_BACKEND = "tensorflow"

if "KERAS_HOME" in os.environ:
    _KERAS_DIR = os.environ.get("KERAS_HOME")
else:
    _keras_base_dir = os.path.expanduser("~")
    if not os.access(_keras_base_dir, os.W_OK):
        _keras_base_dir = "/tmp"
    _KERAS_DIR = os.path.join(_keras_base_dir, ".keras")

_config_path = os.path.expanduser(os.path.join(_KERAS_DIR, "keras.json"))
if os.path.exists(_config_path):
    try:
        with open(_config_path) as f:
            _config = json.load(f)
    except ValueError:
        _config = {}
    _BACKEND = _config.get("backend", _BACKEND)

if "KERAS_BACKEND" in os.environ:
    _backend = os.environ["KERAS_BACKEND"]
    if _backend:
        _BACKEND = _backend


def backend():
    """The name of the backend Keras uses: "tensorflow", "jax", "torch", "numpy" or "openvino"."""
    return _BACKEND
