"""distrun's worker API for Python: the job's key-value store and barriers, and this worker's identity.

    import distrun
    if distrun.rank() == 0:
        distrun.set("data/path", "/scratch/run7")
    path = distrun.get("data/path", timeout=60, text=True)   # waits until worker 0 has set it
    distrun.barrier("ready")

The module-level functions use one client per process, opened at first use from the variables distrun sets
for every worker (DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN, DISTRUN_PROCESS_ID). `Client` takes them as
arguments instead and has the same methods; it may be shared by threads.

This is ctypes over distrun's C client library, libdistrun_client.so.0 (<distrun/client.h>), found through
DISTRUN_CLIENT_LIBRARY (a path), else the one beside this module (the wheel's), else the one installed with
this module by cmake --install, else the dynamic loader.

Keys are str (or bytes). Values are bytes or str (stored as UTF-8); they come back as bytes, or as str
with text=True. Timeouts are seconds; None waits as long as the runtime allows a wait to last, a day.
"""
import atexit
import ctypes
import enum
import functools
import math
import mmap
import os
import struct
import threading
import time

# Without set and list, which `from distrun import *` would let shadow the builtins: use distrun.set.
__all__ = [
    "Client", "Status", "DistrunError", "LibraryNotFoundError", "NotInJobError", "InvalidArgumentError",
    "NotFoundError", "AlreadyExistsError", "FailedPreconditionError", "OutOfRangeError", "DeadlineExceededError",
    "ResourceExhaustedError", "AbortedError", "UnavailableError", "UnauthenticatedError", "CancelledError",
    "get", "try_get", "add", "compare_and_set", "delete", "barrier", "library_path",
    "rank", "world_size", "local_rank", "local_world_size", "node_rank", "num_nodes", "restart_count",
    "run_id", "epoch", "progress", "section",
]

LIBRARY_ENV = "DISTRUN_CLIENT_LIBRARY"
SONAME = "libdistrun_client.so.0"
# The runtime cuts longer waits to a day (and so does `distrun kv get` without --timeout); the C API has
# no "forever".
MAX_WAIT = 24 * 3600.0


# ---- errors ----

class Status(enum.IntEnum):
    """distrun_status of <distrun/client.h>."""
    OK = 0
    INVALID_ARGUMENT = 1
    NOT_FOUND = 2
    ALREADY_EXISTS = 3
    FAILED_PRECONDITION = 4
    OUT_OF_RANGE = 5
    DEADLINE_EXCEEDED = 6
    RESOURCE_EXHAUSTED = 7
    ABORTED = 8
    UNAVAILABLE = 9
    UNAUTHENTICATED = 10
    CANCELLED = 11


class DistrunError(Exception):
    """A call failed; str(e) is the client library's message. `status` is the Status of the failed call
    (None for errors that happen before any call: no library, no job)."""
    status = None

    @property
    def code(self):
        return None if self.status is None else int(self.status)


# Subclasses take one argument, the message: builtin mixins such as OSError read two as (errno, strerror).
class InvalidArgumentError(DistrunError, ValueError):
    """A bad key, value, timeout or barrier count."""
    status = Status.INVALID_ARGUMENT


class NotFoundError(DistrunError):
    status = Status.NOT_FOUND


class AlreadyExistsError(DistrunError):
    """This worker arrived twice at one barrier."""
    status = Status.ALREADY_EXISTS


class FailedPreconditionError(DistrunError):
    """add() on a value that is not a decimal integer; a job-wide barrier before rendezvous."""
    status = Status.FAILED_PRECONDITION


class OutOfRangeError(DistrunError):
    """add() would overflow int64."""
    status = Status.OUT_OF_RANGE


class DeadlineExceededError(DistrunError, TimeoutError):
    """A get() or barrier() timed out (the message names the key, or who is missing)."""
    status = Status.DEADLINE_EXCEEDED


class ResourceExhaustedError(DistrunError):
    status = Status.RESOURCE_EXHAUSTED


class AbortedError(DistrunError):
    """The job stopped or is restarting."""
    status = Status.ABORTED


class UnavailableError(DistrunError, ConnectionError):
    """The runtime cannot be reached."""
    status = Status.UNAVAILABLE


class UnauthenticatedError(DistrunError, PermissionError):
    """The runtime refused the job token."""
    status = Status.UNAUTHENTICATED


class CancelledError(DistrunError):
    status = Status.CANCELLED


class NotInJobError(DistrunError):
    """The variables distrun sets for its workers are missing or bad: the program does not run under
    distrun."""


class LibraryNotFoundError(DistrunError, ImportError):
    """libdistrun_client.so.0 could not be loaded."""


_ERRORS = {cls.status: cls for cls in (
    InvalidArgumentError, NotFoundError, AlreadyExistsError, FailedPreconditionError, OutOfRangeError,
    DeadlineExceededError, ResourceExhaustedError, AbortedError, UnavailableError, UnauthenticatedError,
    CancelledError)}

_WORKER_VARIABLES = "DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN and DISTRUN_PROCESS_ID"


# ---- the C library ----

class _Entry(ctypes.Structure):
    _fields_ = [("key", ctypes.c_void_p), ("value", ctypes.c_void_p), ("value_len", ctypes.c_size_t)]


_lib = None
_lib_lock = threading.Lock()


def _candidates():
    """(path, where it came from), in the order they are tried."""
    named = os.environ.get(LIBRARY_ENV)
    if named:
        # A library named explicitly is the only one tried: falling back would hide the mistake.
        return [(named, LIBRARY_ENV)]
    found = []
    # The wheel puts the library in the package (scripts/make_wheel.py): the one installed beside the module
    # always matches it.
    beside = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    if os.path.exists(beside):
        found.append((beside, "installed beside this module"))
    try:
        from . import _install  # written by `cmake --install` (cmake/python.cmake)
        found.append((_install.LIBRARY, "installed with this module"))
    except ImportError:
        pass
    found.append((SONAME, "the dynamic loader's search path"))
    return found


def _declare(lib):
    c = ctypes
    handle, size, i64, p = c.c_void_p, c.c_size_t, c.c_int64, c.c_char_p
    out_int, out_ptr, out_size = c.POINTER(c.c_int), c.POINTER(c.c_void_p), c.POINTER(c.c_size_t)
    signatures = {
        "distrun_client_open": (handle, [p, p, c.c_int, i64, p, size]),
        "distrun_client_open_env": (handle, [i64, p, size]),
        "distrun_client_close": (None, [handle]),
        "distrun_client_last_error": (size, [handle, p, size]),
        "distrun_kv_set": (c.c_int, [handle, p, p, size]),
        "distrun_kv_get": (c.c_int, [handle, p, i64, out_ptr, out_size]),
        "distrun_kv_try_get": (c.c_int, [handle, p, out_int, out_ptr, out_size]),
        "distrun_kv_add": (c.c_int, [handle, p, i64, c.POINTER(i64)]),
        "distrun_kv_cas": (c.c_int, [handle, p, p, size, p, size, out_int]),
        "distrun_kv_del": (c.c_int, [handle, p, out_int]),
        "distrun_kv_list": (c.c_int, [handle, p, c.POINTER(c.POINTER(_Entry)), out_size]),
        "distrun_kv_list_free": (None, [c.POINTER(_Entry), size]),
        "distrun_barrier": (c.c_int, [handle, p, c.c_int, i64]),
        "distrun_free": (None, [c.c_void_p]),
        "distrun_progress": (c.c_int, [i64]),
    }
    for name, (restype, argtypes) in signatures.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = restype, argtypes


def _library():
    """The loaded C library; loads it on first use."""
    global _lib
    with _lib_lock:
        if _lib is None:
            tried = []
            for path, origin in _candidates():
                try:
                    lib = ctypes.CDLL(path)  # CDLL releases the GIL during calls: waits block no other thread
                    _declare(lib)
                except (OSError, AttributeError) as e:
                    tried.append(f"{path} ({origin}): {e}")
                    continue
                _lib = lib
                break
            else:
                raise LibraryNotFoundError(
                    f"cannot load distrun's client library {SONAME}; tried:\n  " + "\n  ".join(tried) +
                    f"\nInstall distrun, or set {LIBRARY_ENV} to the library's path.")
        return _lib


class _DlInfo(ctypes.Structure):
    _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p),
                ("sname", ctypes.c_char_p), ("saddr", ctypes.c_void_p)]


def library_path():
    """The file of the client library this module uses (loading it)."""
    lib = _library()
    # Asked of the loader (dladdr), since a library found by its soname has no path of ours.
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.cast(lib.distrun_free, ctypes.c_void_p), ctypes.byref(info)) or not info.fname:
        return lib._name
    return os.fsdecode(info.fname)


# ---- conversions ----

def _key(key, what="key"):
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogateescape")
    elif not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"{what} must be str or bytes, not {type(key).__name__}")
    if b"\0" in key:
        raise ValueError(f"{what} {bytes(key)!r} contains a NUL byte")  # the C API takes C strings
    return bytes(key)


def _value(value, what="value"):
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes or str, not {type(value).__name__}")


def _decode(data, text):
    return data.decode("utf-8") if text else data


def _millis(timeout):
    """Seconds to the C API's milliseconds: rounded up (a short wait stays positive), a day at most."""
    if timeout is None or timeout >= MAX_WAIT:
        return int(MAX_WAIT * 1000)
    return math.ceil(timeout * 1000)


def _take(lib, ptr, length):
    """Copies a buffer the library returned, and frees it."""
    try:
        return ctypes.string_at(ptr, length) if ptr else b""
    finally:
        if ptr:
            lib.distrun_free(ptr)


# ---- the client ----

class Client:
    """A client of the job's runtime.

    Client() reads DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN and DISTRUN_PROCESS_ID as distrun sets them
    for every worker; Client(address, token, process_id) takes them as arguments. Without a token (outside
    the job), each call carries a munge credential of this user, which a job protected by munge accepts from
    its own user (munged at DISTRUN_MUNGE_SOCKET, else where Slurm's configuration says, else libmunge's
    default); a refusal raises UnauthenticatedError saying so. `call_timeout` (seconds,
    default 30) bounds the calls that do not wait on other workers. Opening does not connect: the first
    call does. A client may be shared by threads (when several fail at once, a message may be another
    thread's; the exception's class is always the call's own). close() it, or use it in a `with`.
    """

    def __init__(self, address=None, token=None, process_id=None, *, call_timeout=None):
        self._lock = threading.Lock()
        self._handle = None
        self._users = 0
        self._closing = False
        lib = _library()
        call_ms = 0 if call_timeout is None else max(1, math.ceil(call_timeout * 1000))
        error = ctypes.create_string_buffer(1024)
        if address is None:
            if token is not None or process_id is not None:
                raise TypeError("Client: token and process_id go with an address (without one, all three come "
                                "from the worker's environment)")
            handle = lib.distrun_client_open_env(call_ms, error, len(error))
            self._describe = (os.environ.get("DISTRUN_COORDINATOR_ADDRESS"),
                              os.environ.get("DISTRUN_PROCESS_ID", "0"))
            if not handle:
                raise NotInJobError(f"{error.value.decode(errors='replace')} (distrun sets {_WORKER_VARIABLES} "
                                    "for every worker it starts; elsewhere use "
                                    "distrun.Client(address, token, process_id))")
        else:
            handle = lib.distrun_client_open(_value(address, "address"), _value(token or "", "token"),
                                             int(process_id or 0), call_ms, error, len(error))
            self._describe = (address, process_id or 0)
            if not handle:
                raise InvalidArgumentError(error.value.decode(errors="replace"))
        self._lib = lib
        self._handle = handle

    def __repr__(self):
        address, process_id = self._describe
        state = " closed" if self._handle is None else ""
        return f"<distrun.Client{state} address={address!r} process_id={process_id}>"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            self.close()

    def close(self):
        """Closes the client; calls still running in other threads finish first."""
        with self._lock:
            self._closing = True
            self._release()

    def _release(self):  # with self._lock held
        if self._closing and self._users == 0 and self._handle is not None:
            self._lib.distrun_client_close(self._handle)
            self._handle = None

    def _call(self, name, *args):
        """Calls distrun_<name>(handle, *args), raising the status as an exception. The handle is held
        for the call, so that close() in another thread cannot free it underneath."""
        with self._lock:
            if self._closing:
                raise ValueError("the distrun.Client is closed")
            self._users += 1
            handle = self._handle
        try:
            status = getattr(self._lib, "distrun_" + name)(handle, *args)
            if status != Status.OK:
                raise self._error(handle, status)
        finally:
            with self._lock:
                self._users -= 1
                self._release()

    def _error(self, handle, status):
        n = self._lib.distrun_client_last_error(handle, None, 0)
        buffer = ctypes.create_string_buffer(n + 1)
        self._lib.distrun_client_last_error(handle, buffer, len(buffer))
        message = buffer.value.decode("utf-8", "replace")
        try:
            cls = _ERRORS.get(Status(status), DistrunError)
        except ValueError:
            cls = DistrunError  # a status newer than this module
        # A refusal's message (UnauthenticatedError) already says what was presented and what to do.
        error = cls(message)
        if cls is DistrunError:
            error.status = status
        return error

    # -- the key-value store --

    def set(self, key, value):
        """Sets key to value (bytes or str)."""
        value = _value(value)
        self._call("kv_set", _key(key), value, len(value))

    def get(self, key, timeout=None, *, text=False):
        """Waits until key exists and returns its value: bytes, or str with text=True. Raises
        DeadlineExceededError (a TimeoutError) after `timeout` seconds (None: a day)."""
        ptr, length = ctypes.c_void_p(), ctypes.c_size_t()
        self._call("kv_get", _key(key), _millis(timeout), ctypes.byref(ptr), ctypes.byref(length))
        return _decode(_take(self._lib, ptr.value, length.value), text)

    def try_get(self, key, *, text=False):
        """The value of key (bytes, or str with text=True), or None when it does not exist."""
        found, ptr, length = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_size_t()
        self._call("kv_try_get", _key(key), ctypes.byref(found), ctypes.byref(ptr), ctypes.byref(length))
        data = _take(self._lib, ptr.value, length.value)
        return _decode(data, text) if found.value else None

    def add(self, key, delta=1):
        """Adds delta to the decimal integer under key (absent: 0) and returns the sum: a job-wide counter."""
        result = ctypes.c_int64()
        self._call("kv_add", _key(key), int(delta), ctypes.byref(result))
        return result.value

    def compare_and_set(self, key, expected, desired):
        """Sets key to desired if it holds expected (None: if it is absent). Returns whether it did."""
        expected = None if expected is None else _value(expected, "expected")
        desired = _value(desired, "desired")
        swapped = ctypes.c_int()
        self._call("kv_cas", _key(key), expected, 0 if expected is None else len(expected), desired,
                   len(desired), ctypes.byref(swapped))
        return bool(swapped.value)

    def delete(self, key):
        """Deletes key. Returns whether it existed."""
        deleted = ctypes.c_int()
        self._call("kv_del", _key(key), ctypes.byref(deleted))
        return bool(deleted.value)

    def list(self, prefix="", *, text=False):
        """{key: value} of every key that starts with prefix, in key order (values as in get)."""
        entries, count = ctypes.POINTER(_Entry)(), ctypes.c_size_t()
        self._call("kv_list", _key(prefix, "prefix"), ctypes.byref(entries), ctypes.byref(count))
        try:
            return {ctypes.string_at(e.key).decode("utf-8", "surrogateescape"):
                    _decode(ctypes.string_at(e.value, e.value_len), text)
                    for e in (entries[i] for i in range(count.value))}
        finally:
            self._lib.distrun_kv_list_free(entries, count.value)

    # -- barriers --

    def barrier(self, name, timeout=None, count=0):
        """Waits until `count` workers (0: every worker of the job) reached barrier `name`; it can be used
        again afterwards. Raises DeadlineExceededError (a TimeoutError) naming who is missing after
        `timeout` seconds (None: a day)."""
        self._call("barrier", _key(name, "barrier name"), int(count), _millis(timeout))


# ---- the default client: this worker's ----

_default_client = None
_default_lock = threading.Lock()


def _reset_default():
    """Forgets this worker's client: the next call opens one with the variables as they are now (a world
    recovered in place changes DISTRUN_EPOCH, and after node 0's loss DISTRUN_COORDINATOR_ADDRESS)."""
    global _default_client
    with _default_lock:
        client, _default_client = _default_client, None
    if client is not None:
        client.close()


def _default():
    global _default_client
    with _default_lock:
        if _default_client is None:
            _default_client = Client()
            atexit.register(_default_client.close)
        return _default_client


# Defined last: they shadow the builtins set and list in this module.
def set(key, value):
    """Client.set on this worker's client."""
    _default().set(key, value)


def get(key, timeout=None, *, text=False):
    """Client.get on this worker's client."""
    return _default().get(key, timeout, text=text)


def try_get(key, *, text=False):
    """Client.try_get on this worker's client."""
    return _default().try_get(key, text=text)


def add(key, delta=1):
    """Client.add on this worker's client."""
    return _default().add(key, delta)


def compare_and_set(key, expected, desired):
    """Client.compare_and_set on this worker's client."""
    return _default().compare_and_set(key, expected, desired)


def delete(key):
    """Client.delete on this worker's client."""
    return _default().delete(key)


def list(prefix="", *, text=False):
    """Client.list on this worker's client."""
    return _default().list(prefix, text=text)


def barrier(name, timeout=None, count=0):
    """Client.barrier on this worker's client."""
    _default().barrier(name, timeout, count)


# ---- progress, for distrun's hang watch ----

def progress(step):
    """Tells distrun that this worker reached `step` (an int that grows as the job advances, e.g. the training
    step). It writes this worker's slot of a board in shared memory: about a microsecond, no network. The
    first report arms distrun's hang watch for this worker (distrun --hang-timeout): when the least advanced
    rank reports no new step for that long, distrun shows every rank's stack and stops (or restarts) the job.

    Returns True, or False outside a distrun job (so a script runs unchanged without distrun)."""
    return _library().distrun_progress(int(step)) == 0


# ---- sections, for distrun's straggler detection ----

class _SectionBoard:
    """This worker's slot of distrun's progress board, mapped for its sections (the layout of
    runtime/progress/progress_board.h: a 64-byte header, a 64-byte line per slot, then per slot 8 sections
    of a 64-byte line (name, run count) and a ring of durations). Written directly, not through the C
    library: a ctypes call costs about as much as the whole run of a section should."""
    MAGIC = b"DRPROG2\0"
    LINE = 64

    def __init__(self, path, slot):
        with open(path, "r+b") as f:
            self._map = mmap.mmap(f.fileno(), 0)
        if self._map[:8] != self.MAGIC:
            raise FailedPreconditionError(f"{path} is not a progress board of this distrun's layout")
        slots, self.per_slot, self.ring = struct.unpack_from("<III", self._map, 8)
        if not 0 <= slot < slots:
            raise FailedPreconditionError(f"progress slot {slot} is not on the board {path} ({slots} slots)")
        self._section_bytes = self.LINE + 8 * self.ring
        self._first = self.LINE * (1 + slots) + self._section_bytes * self.per_slot * slot
        if len(self._map) < self._first + self._section_bytes * self.per_slot:
            raise FailedPreconditionError(f"{path} is too small for slot {slot}")
        self.words = memoryview(self._map).cast("q")
        self._lock = threading.Lock()
        self._names = {}

    def index(self, name):
        """(word of the run count, word of the ring's start) of section `name`, naming it on first use."""
        found = self._names.get(name)
        if found is not None:
            return found
        raw = name.encode()[:31]
        with self._lock:
            for i in range(self.per_slot):
                at = self._first + self._section_bytes * i
                named = self._map[at:at + 32].split(b"\0", 1)[0]
                if not named:
                    # The name is in place before the first run's count makes the section visible.
                    self._map[at:at + len(raw)] = raw
                elif named != raw:
                    continue
                found = ((at + 32) // 8, (at + self.LINE) // 8)
                self._names[name] = found
                return found
        raise InvalidArgumentError(f"distrun.section({name!r}): a worker has at most {self.per_slot} section "
                                   f"names, and has {', '.join(sorted(self._names))}")


_board = None      # _SectionBoard, or False outside a job
_board_lock = threading.Lock()


def _section_board():
    global _board
    with _board_lock:
        if _board is None:
            path = os.environ.get("DISTRUN_PROGRESS_FILE")
            slot = os.environ.get("DISTRUN_PROGRESS_SLOT", "")
            try:
                _board = _SectionBoard(path, int(slot)) if path and slot.isdigit() else False
            except OSError:
                _board = False
        return _board


_clock = time.perf_counter_ns  # CLOCK_MONOTONIC: the board's durations are differences of it


def _record(at, start):
    """One run of the section at `at` (_section_place) that began at perf_counter_ns `start`."""
    duration = _clock() - start
    words, runs_at, ring_at, ring = at
    runs = words[runs_at]
    words[ring_at + runs % ring] = duration
    words[runs_at] = runs + 1  # last: a reader that sees the count sees the duration


class section:
    """Marks this worker's own compute, for distrun's straggler detection:

        with distrun.section("fwd"):
            loss = model(batch)

        @distrun.section("data")
        def next_batch(): ...

    distrun takes each rank's median time in each section and compares it with the fastest rank's: a rank
    that is slower than --straggler-threshold of the fastest (0.75) for several windows in a row is named
    a straggler. Mark compute only: time waiting in a collective is the same on every rank of a synchronous
    job. A run costs well under a microsecond (two clock reads and three stores to shared memory; no
    message); a section object made once and entered many times costs least. A worker has at most 8
    section names; names are cut to 31 bytes. Outside a distrun job a section does nothing."""
    __slots__ = ("name", "_at", "_start")

    def __init__(self, name):
        at = _section_at.get(name)
        if at is None:
            at = _section_place(name)
        self.name = name
        self._at = at

    def __enter__(self):
        self._start = _clock()
        return self

    def __exit__(self, exc_type, exc, traceback):
        at = self._at
        if at:
            # _record, inlined: a call is a tenth of the budget.
            duration = _clock() - self._start
            words, runs_at, ring_at, ring = at
            runs = words[runs_at]
            words[ring_at + runs % ring] = duration
            words[runs_at] = runs + 1
        return False

    def __call__(self, function):
        at = self._at

        @functools.wraps(function)
        def timed(*args, **kwargs):
            start = _clock()
            try:
                return function(*args, **kwargs)
            finally:
                if at:
                    _record(at, start)
        return timed


# name -> (the board's words, the word of its run count, of its ring's start, the ring's length); () outside
# a job
_section_at = {}


def _section_place(name):
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"distrun.section needs a non-empty name, not {name!r}")
    board = _section_board()
    at = (board.words, *board.index(name), board.ring) if board else ()
    _section_at[name] = at
    return at


# ---- this worker's identity, from the variables distrun sets ----

def _env(name, default=None):
    value = os.environ.get(name)
    if value is None or value == "":
        if default is not None:
            return default
        raise NotInJobError(f"{name} is not set: run this program as a worker of distrun "
                            "(distrun -- python3 script.py), which sets it")
    return value


def _env_int(name, default=None):
    value = _env(name, default)
    try:
        return int(value)
    except ValueError:
        raise NotInJobError(f"{name}={value!r} is not an integer") from None


def rank():
    """This worker's process id in the job, 0 to world_size() - 1 (DISTRUN_PROCESS_ID)."""
    return _env_int("DISTRUN_PROCESS_ID")


def world_size():
    """The number of workers of the job (DISTRUN_NUM_PROCESSES)."""
    return _env_int("DISTRUN_NUM_PROCESSES")


def local_rank():
    """This worker's index on its node (DISTRUN_LOCAL_RANK)."""
    return _env_int("DISTRUN_LOCAL_RANK")


def local_world_size():
    """The number of workers on this node (DISTRUN_LOCAL_WORLD_SIZE)."""
    return _env_int("DISTRUN_LOCAL_WORLD_SIZE")


def node_rank():
    """This node's index in the job (DISTRUN_NODE_RANK)."""
    return _env_int("DISTRUN_NODE_RANK")


def num_nodes():
    """The number of nodes of the job (DISTRUN_NUM_NODES)."""
    return _env_int("DISTRUN_NUM_NODES")


def restart_count():
    """How often the job's workers were restarted so far (DISTRUN_RESTART_COUNT)."""
    return _env_int("DISTRUN_RESTART_COUNT")


def run_id():
    """The job's run id (DISTRUN_RUN_ID)."""
    return _env("DISTRUN_RUN_ID")


def epoch():
    """The job's epoch (DISTRUN_EPOCH): 0 at first, one more each time the workers are started again (after
    a worker failure with --max-restarts, or when an elastic job goes on without a lost node). 0 when the
    variable is absent (a distrun that does not set it)."""
    return _env_int("DISTRUN_EPOCH", "0")
