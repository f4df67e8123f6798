"""Stand-in of horovod/common/basics.py (Horovod 0.28): `HorovodBasics`, the ctypes wrapper every framework
binding uses (`horovod.torch`, `horovod.tensorflow`). What it keeps of the real one is how the world is found:
Horovod built with MPI initialises MPI in `init()` (its C++ core calls MPI_Init_thread unless MPI is already
initialised or a communicator is given) and takes MPI_COMM_WORLD's size and rank; it never reads RANK or
WORLD_SIZE. Without horovodrun's Gloo variables (HOROVOD_GLOO_RENDEZVOUS_ADDR...) an MPI build uses MPI.

The stand-in's "extension" is Debian's Open MPI library itself, through ctypes.
"""
import atexit
import ctypes


class HorovodBasics(object):
    """Wrapper class for the basic Horovod API (the stand-in's)."""

    def __init__(self, pkg_path, *args):
        del pkg_path, args  # the real one loads its extension next to pkg_path
        self.MPI_LIB_CTYPES = ctypes.CDLL("libmpi.so.40", mode=ctypes.RTLD_GLOBAL)
        self._world = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(self.MPI_LIB_CTYPES,
                                                                               "ompi_mpi_comm_world")))
        self._size = -1
        self._rank = -1

    def init(self, comm=None, process_sets=None):
        """Initialises Horovod: MPI_COMM_WORLD unless `comm` (an mpi4py communicator or a list of ranks)
        names a subset."""
        del process_sets
        lib = self.MPI_LIB_CTYPES
        initialized = ctypes.c_int(0)
        lib.MPI_Initialized(ctypes.byref(initialized))
        if not initialized.value and lib.MPI_Init(None, None) != 0:
            raise ValueError("Horovod initialization failed; MPI_Init failed")
        atexit.register(self.shutdown)  # as the real init does
        size, rank = ctypes.c_int(), ctypes.c_int()
        lib.MPI_Comm_size(self._world, ctypes.byref(size))
        lib.MPI_Comm_rank(self._world, ctypes.byref(rank))
        if comm is not None and not hasattr(comm, "Get_size"):
            ranks = list(comm)
            self._size, self._rank = len(ranks), ranks.index(rank.value)
        else:
            self._size, self._rank = size.value, rank.value

    def shutdown(self):
        finalized = ctypes.c_int(0)
        self.MPI_LIB_CTYPES.MPI_Finalized(ctypes.byref(finalized))
        if not finalized.value:
            self.MPI_LIB_CTYPES.MPI_Finalize()

    def is_initialized(self):
        return self._size > 0

    def size(self):
        if self._size < 0:
            raise ValueError("Horovod has not been initialized; use hvd.init().")
        return self._size

    def rank(self):
        if self._rank < 0:
            raise ValueError("Horovod has not been initialized; use hvd.init().")
        return self._rank
