"""Stand-in of horovod/torch (Horovod 0.28): the module-level API is bound from one HorovodBasics at import,
as in horovod/torch/mpi_ops.py (`init = _basics.init`, `size = _basics.size`, ...)."""
from horovod.common.basics import HorovodBasics as _HorovodBasics

_basics = _HorovodBasics(__file__, "mpi_lib_v2")

init = _basics.init
shutdown = _basics.shutdown
is_initialized = _basics.is_initialized
size = _basics.size
rank = _basics.rank
