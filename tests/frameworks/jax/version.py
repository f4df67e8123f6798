"""Stand-in for jax/version.py: the release this stand-in behaves as (STANDIN_JAX_VERSION)."""
from jax._src._standin import VERSION as _version

__version__ = _version
_minimum_jaxlib_version = _version
