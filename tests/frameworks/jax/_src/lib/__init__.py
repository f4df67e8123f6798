"""Stand-in for jax._src.lib, reduced to the coordination service that jax.distributed.initialize() starts.

JAX's service and client live in jaxlib's C++ extension: `jax._src.lib.xla_extension` in 0.4.x,
`jax._src.lib._jax` in the newest sources. Both names point at the stand-in's small TCP implementation
(coordination.py), which keeps what a launcher's test needs from the real one: process 0 really listens on
the coordinator's port, every process really connects to the coordinator address, and a wrong world (a
duplicate process id, an id out of range, a different process count) fails loudly.
"""
from jax._src.lib import coordination as xla_extension
from jax._src.lib import coordination as _jax

XlaRuntimeError = xla_extension.XlaRuntimeError
