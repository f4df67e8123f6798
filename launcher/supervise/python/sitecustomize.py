# Written by distrun (launcher/supervise/python/sitecustomize.py) into a private directory on every
# worker's PYTHONPATH; do not edit. In every Python worker it:
# - lets distrun ask this process for its stacks (faulthandler on a signal of distrun's);
# - moves the Flight Recorder variables distrun set to the names of the worker's torch;
# - hooks the import of frameworks that find their world themselves, so that they find distrun's plan:
#   JAX's cluster detection gets distrun's cluster first, and mpi4py and Horovod stop when MPI's world is not
#   the job's;
# - then runs the sitecustomize module this one shadows on sys.path.
# It never raises, except where a framework would otherwise build a wrong world, and never imports a
# framework itself: a worker must start whatever happens here, and fast.
_distrun_stack_file = None


def _distrun_register():
    global _distrun_stack_file
    try:
        import os
        directory = os.environ.get("DISTRUN_STACKS_DIR")
        signum = os.environ.get("DISTRUN_STACK_SIGNAL")
        if not directory or not signum:
            return
        import faulthandler
        path = os.path.join(directory, "%d.stack" % os.getpid())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
        new_file = open(fd, "ab", buffering=0)
        # chain=False: with nothing before it (Python installs no handler for this signal), chaining would
        # re-raise the signal with its default action, which kills the process.
        faulthandler.register(int(signum), file=new_file, all_threads=True, chain=False)
        # faulthandler writes to the descriptor; the file object must outlive the registration.
        _distrun_stack_file = new_file
    except Exception:
        pass


def _distrun_chain():
    import os
    import sys
    try:
        import importlib.machinery
        here = os.path.dirname(os.path.abspath(__file__))

        def is_here(entry):
            try:
                return os.path.samefile(entry or ".", here)
            except Exception:
                return False

        entries = list(sys.path)
        after = next((i + 1 for i, entry in enumerate(entries) if is_here(entry)), 0)
        rest = [entry for entry in entries[after:] if not is_here(entry)]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if spec is None or spec.loader is None:
            return
        # Built by hand: importlib.util would add milliseconds to every worker's start.
        module = type(sys)(spec.name)
        module.__spec__ = spec
        module.__loader__ = spec.loader
        module.__file__ = spec.origin
    except Exception:
        return
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        # What Python's site module prints for a failing sitecustomize.
        try:
            sys.stderr.write("Error in sitecustomize; set PYTHONVERBOSE for traceback:\n%s: %s\n"
                             % (err.__class__.__name__, err))
        except Exception:
            pass


# torch 2.8 renamed the Flight Recorder's variables and warns on every rank for the old names, which are
# the ones every 2.x reads. DISTRUN_TORCH_RENAME lists those distrun set (never the user's); where this
# Python's torch is 2.8 or later they move to the new names before torch reads them. torch's version comes
# from its version.py: importing torch here would cost every worker seconds.
_DISTRUN_TORCH_NEW_NAMES = {"TORCH_NCCL_TRACE_BUFFER_SIZE": "TORCH_FR_BUFFER_SIZE",
                            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": "TORCH_FR_DUMP_TEMP_FILE"}


def _distrun_torch_names():
    try:
        import os
        names = os.environ.get("DISTRUN_TORCH_RENAME")
        if not names:
            return
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec("torch")
        if spec is None or not spec.submodule_search_locations:
            return
        version = None
        with open(os.path.join(list(spec.submodule_search_locations)[0], "version.py")) as f:
            for line in f:
                if line.startswith("__version__"):
                    version = line.split("=", 1)[1].strip().strip("'\"").split(".")
                    break
        if not version or (int(version[0]), int(version[1])) < (2, 8):
            return
        for old in names.split(","):
            new = _DISTRUN_TORCH_NEW_NAMES.get(old)
            if new is None or old not in os.environ:
                continue
            os.environ.setdefault(new, os.environ[old])
            del os.environ[old]
    except Exception:
        pass


# ---- frameworks that find their world themselves (DESIGN §4.6) ----
# Each hook runs right after its module has been imported by the worker's own code, so a worker that never
# imports the framework pays one dictionary look-up per import and nothing else.

def _distrun_jax_clusters(module):
    # JAX has registered its cluster environments (Open MPI, Slurm, TPU, Kubernetes...), which would read
    # the launcher's view of the distrun process: distrun's plan goes first (distrun.jax, copied here).
    try:
        import _distrun_jax
        _distrun_jax.register()
    except Exception as err:
        import sys
        sys.stderr.write("distrun: could not put distrun's cluster first in JAX's detection (%s: %s); "
                         "jax.distributed.initialize() without arguments may not find distrun's plan: "
                         "import distrun.jax before it, or pass num_processes and process_id\n"
                         % (err.__class__.__name__, err))


def _distrun_world_problem(framework, size, rank, how):
    # None when MPI's world (as `framework` found it) is the job's; else the one line that says why not.
    import os
    world = os.environ.get("DISTRUN_NUM_PROCESSES")
    mine = os.environ.get("DISTRUN_PROCESS_ID")
    try:
        if world is None or mine is None or (size, rank) == (int(world), int(mine)):
            return None
    except ValueError:
        return None
    return ("distrun: %s's world here is %d process(es) (this one rank %d) but distrun's job has %s workers "
            "(this one rank %s): %s, and the launcher started one distrun per node (or the job changed since), "
            "not one MPI process per worker. To use it, start one distrun per worker (srun --ntasks-per-node=G "
            "distrun, mpirun -np N distrun); otherwise use distrun's store or torch.distributed"
            % (framework, size, rank, world, mine, how))


def _distrun_mpi4py(module):
    # MPI is initialised when mpi4py.MPI is imported (unless mpi4py.rc.initialize is False). A worker that
    # is not the launcher's MPI process (several workers per task, or ranks an elastic epoch renumbered)
    # has no launcher variables left (launcher/plan/task_variables.h): its world is itself alone.
    try:
        if not module.Is_initialized() or module.Is_finalized():
            return
        problem = _distrun_world_problem("mpi4py", module.COMM_WORLD.Get_size(), module.COMM_WORLD.Get_rank(),
                                         "MPI's world is the launcher's")
    except Exception:
        return
    if problem:
        # An ImportError: code that uses MPI only when it is there goes on without it.
        raise ImportError(problem)


def _distrun_horovod(module):
    # Horovod's init() joins MPI's world (or horovodrun's Gloo rendezvous), never RANK and WORLD_SIZE: every
    # framework binding calls HorovodBasics.init, checked here once it returns.
    basics = getattr(module, "HorovodBasics", None)
    init = getattr(basics, "init", None)
    if init is None:
        return

    def init_checked(self, comm=None, *args, **kwargs):
        result = init(self, comm, *args, **kwargs)
        if comm is None:  # a communicator of the user's is a world of the user's choosing
            problem = _distrun_world_problem("Horovod", self.size(), self.rank(),
                                             "Horovod's world is MPI's, which is the launcher's")
            if problem:
                raise RuntimeError(problem)
        return result

    init_checked.__doc__ = getattr(init, "__doc__", None)
    basics.init = init_checked


_DISTRUN_IMPORT_HOOKS = {"jax._src.clusters": _distrun_jax_clusters, "mpi4py.MPI": _distrun_mpi4py,
                         "horovod.common.basics": _distrun_horovod}


class _DistrunImportHook(object):
    """A meta-path finder that finds nothing itself: for a hooked module it asks the other finders, and makes
    the loader they return run the hook once the module has run."""

    def find_spec(self, name, path=None, target=None):
        action = _DISTRUN_IMPORT_HOOKS.get(name)
        if action is None:
            return None
        import sys
        spec = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                break
        loader = getattr(spec, "loader", None)
        # Only a loader of this module alone (file loaders are made per module) is given the hook.
        if loader is None or isinstance(loader, type) or not hasattr(loader, "exec_module"):
            return spec
        real_exec = loader.exec_module

        def exec_module(module):
            if getattr(module, "__name__", None) != name:
                return real_exec(module)
            try:
                del loader.exec_module
            except AttributeError:
                pass
            _DISTRUN_IMPORT_HOOKS.pop(name, None)
            if not _DISTRUN_IMPORT_HOOKS:
                try:
                    sys.meta_path.remove(self)
                except ValueError:
                    pass
            real_exec(module)
            action(module)

        loader.exec_module = exec_module
        return spec


def _distrun_hook_imports():
    try:
        import sys
        if sys.version_info >= (3, 4):
            sys.meta_path.insert(0, _DistrunImportHook())
    except Exception:
        pass


_distrun_register()
_distrun_torch_names()
_distrun_hook_imports()
try:
    import os as _distrun_os
    _distrun_os.register_at_fork(after_in_child=_distrun_register)
    del _distrun_os
except Exception:
    pass
_distrun_chain()
