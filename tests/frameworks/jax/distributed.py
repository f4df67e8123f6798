"""Stand-in for jax/distributed.py: the public `jax.distributed` module (initialize, shutdown, and
is_initialized in the newest generation), re-exported from jax._src.distributed."""
from jax._src import _standin
from jax._src.distributed import initialize as initialize
from jax._src.distributed import shutdown as shutdown

if _standin.NEW:
    from jax._src.distributed import is_initialized as is_initialized
