"""PyTorch's process group for distrun's world, recovered in place when the world changes.

    import distrun.torch

    world = distrun.torch.init_process_group("gloo")   # or "nccl"; a warm spare waits here for a seat
    model = DDP(net)
    while step < steps:
        try:
            train_step(model)
        except Exception as error:
            world = distrun.torch.recover(error)       # the next world; re-raises a bug
            model = DDP(net)                           # the new default group
            # take model and optimizer state from world.source (the same rank for every rank)

Under `distrun --recovery in-process` a change of the job's world (a lost node, a failed worker, a node that
arrived) does not stop this process: distrun tells it on its node's worker channel (a Unix socket named by
DISTRUN_RECOVERY_SOCKET), this module releases the collective that is blocked on the lost peer (NCCL
communicators are aborted; Gloo cannot abort, so the group's own sockets are shut down and the blocked call
fails at once), and `recover()` tears the group down, waits for the next world and forms it under a fresh
store namespace. Under `--recovery restart` (distrun's default) the same calls initialise the epoch's group
from the environment, and `recover()` re-raises: distrun starts the workers again. One script runs in both.

The wire form is runtime/recovery/worker_message.h's: a 4-byte big-endian length, then the message's name
and `key=value` lines."""
import datetime
import os
import socket
import struct
import threading
import time
import traceback

from . import AbortedError, DistrunError, FailedPreconditionError, NotInJobError, UnavailableError

_MAX_FRAME = 1 << 20
_VERSION = 1

__all__ = ["World", "init_process_group", "recover", "world_changed", "world", "new_group"]


class World:
    """One generation's world, as this process sees it.

    rank, world_size, local_rank, local_world_size, group_rank (the node's), group_world_size: the ranks.
    generation: the job's epoch (DISTRUN_EPOCH); one more at every change of the world.
    new: this process holds no training state (a spare's worker, or one started again): take it from
        `source` (or a checkpoint) before the first step.
    source: the rank every rank takes its state from, the same for all; None when no process kept any
        (the first world, or every process is new: load a checkpoint).
    lost: ranks of the previous generation whose processes are gone; joined: ranks of this one held by new
        processes."""
    __slots__ = ("rank", "world_size", "local_rank", "local_world_size", "group_rank", "group_world_size",
                 "generation", "new", "source", "lost", "joined")

    def __init__(self, **fields):
        for name in self.__slots__:
            setattr(self, name, fields.get(name))

    def __repr__(self):
        return "World(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"


# ---- the wire ----

def _frame(name, **fields):
    lines = [name] + [f"{key}={value}" for key, value in fields.items()]
    payload = "\n".join(lines).encode("utf-8", "surrogateescape")
    if len(payload) > _MAX_FRAME:
        raise ValueError(f"a {name} message of {len(payload)} bytes is over the worker channel's limit")
    return struct.pack(">I", len(payload)) + payload


def _decode(payload):
    lines = payload.decode("utf-8", "surrogateescape").split("\n")
    fields = {}
    env = {}
    for line in lines[1:]:
        key, sep, value = line.partition("=")
        if not sep:
            raise DistrunError(f"distrun sent a '{lines[0]}' message with a line {line[:40]!r}")
        if key.startswith("env.") and len(key) > 4:
            env[key[4:]] = value
        else:
            fields.setdefault(key, value)
    return lines[0], fields, env


def _ranks(text):
    out = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def _world_from(fields):
    source = int(fields.get("source", "-1"))
    return World(rank=int(fields["rank"]), world_size=int(fields["world_size"]),
                 local_rank=int(fields["local_rank"]), local_world_size=int(fields["local_world_size"]),
                 group_rank=int(fields["group_rank"]), group_world_size=int(fields["group_world_size"]),
                 generation=int(fields["generation"]), new=fields.get("new") == "1",
                 source=None if source < 0 else source, lost=_ranks(fields.get("lost", "")),
                 joined=_ranks(fields.get("joined", "")))


# ---- the process group's own sockets, so that a blocked Gloo call can be released ----

def _sockets():
    """{fd: 'socket:[inode]'} of this process's sockets now."""
    out = {}
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        return out
    for name in names:
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith("socket:"):
            out[int(name)] = target
    return out


def _shut_down(sockets):
    """Shuts down each socket still open as recorded (a descriptor reused since is left alone): a send or
    receive blocked on it fails at once, in whatever thread it waits."""
    for fd, target in sockets.items():
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != target:
                continue
            s = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        finally:
            s.close()


def _abort(group):
    """Aborts the group's communicators where the backend can (NCCL); Gloo cannot (pytorch#130345), and its
    group is released by shutting its sockets down instead."""
    import torch.distributed as dist
    try:
        if "nccl" not in str(dist.get_backend(group)).lower():
            return
    except Exception:
        return
    c10d = dist.distributed_c10d
    abort_group = getattr(c10d, "_abort_process_group", None)
    if abort_group is not None:
        try:
            abort_group(group)
            return
        except Exception:
            pass
    try:
        import torch
        backend = group._get_backend(torch.device("cuda"))
        if hasattr(backend, "abort"):
            backend.abort()
    except Exception:
        pass


# ---- the channel to this node's distrun ----

class _Channel:
    """The connection to this node's distrun, and a thread that reads it: it keeps the newest world and
    notice, releases the group on a notice, and says ready for a newer generation while recover() waits."""

    def __init__(self, address):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.connect("\0" + address[1:] if address.startswith("@") else address)
        except OSError as e:
            self._sock.close()
            raise UnavailableError(f"cannot reach this node's distrun at {address} (DISTRUN_RECOVERY_SOCKET): "
                                   f"{e}") from None
        self._send_lock = threading.Lock()
        self._cv = threading.Condition()
        self.world = None          # the newest world received: (World, env)
        self.changed = -1          # the newest generation a notice named
        self.closed = None         # why the channel ended
        self.waiting = False       # recover() tore the group down and waits for a world
        self.group_sockets = None  # the current group's sockets; None while one forms
        self.group_before = {}     # sockets before the group (its store's connection included) began
        self.held = -1             # the generation of the group this process holds, -1: none
        self._thread = threading.Thread(target=self._read, name="distrun-recovery", daemon=True)
        self._thread.start()

    def send(self, name, **fields):
        with self._send_lock:
            self._sock.sendall(_frame(name, **fields))

    def _recv_exactly(self, n):
        data = b""
        while len(data) < n:
            chunk = self._sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    def _read(self):
        why = "distrun closed the worker channel"
        try:
            while True:
                head = self._recv_exactly(4)
                if head is None:
                    break
                (n,) = struct.unpack(">I", head)
                if n > _MAX_FRAME:
                    why = f"distrun sent a frame of {n} bytes"
                    break
                payload = self._recv_exactly(n)
                if payload is None:
                    break
                name, fields, env = _decode(payload)
                if name == "world":
                    with self._cv:
                        world = _world_from(fields)
                        if self.world is None or world.generation >= self.world[0].generation:
                            self.world = (world, env, fields.get("store_prefix", ""))
                        self._cv.notify_all()
                elif name == "changed":
                    self._on_changed(int(fields["generation"]))
                elif name == "error":
                    why = "distrun refused this worker: " + fields.get("message", "")
                    break
        except (OSError, ValueError, KeyError, DistrunError) as e:
            why = f"the worker channel failed: {e}"
        with self._cv:
            self.closed = why
            self._cv.notify_all()

    def _on_changed(self, generation):
        with self._cv:
            if generation <= self.changed or generation <= self.held:
                return
            self.changed = generation
            waiting = self.waiting
            sockets = self.group_sockets
            if sockets is None and self.held < 0 and not self.group_before:
                sockets = {}
            elif sockets is None:
                # The group is forming: everything it opened so far.
                now = _sockets()
                sockets = {fd: t for fd, t in now.items() if self.group_before.get(fd) != t}
            self._cv.notify_all()
        if waiting:
            self.send("ready", generation=generation)
            return
        group = _current_group()
        if group is not None:
            _abort(group)
        _shut_down(sockets)

    def wait(self, predicate, timeout=None):
        """Waits until predicate() (under the lock) or the timeout; raises when the channel is gone."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cv:
            while True:
                if predicate():
                    return True
                if self.closed is not None:
                    raise UnavailableError(self.closed)
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cv.wait(left)


_lock = threading.RLock()
_channel = None
_backend = None
_kwargs = {}
_world = None


def _mode():
    return os.environ.get("DISTRUN_RECOVERY", "restart")


def _current_group():
    try:
        import torch.distributed as dist
        if dist.is_initialized():
            return dist.distributed_c10d._get_default_group()
    except Exception:
        pass
    return None


def _default_backend():
    import torch
    return "nccl" if torch.cuda.is_available() else "gloo"


def _timeout_seconds(text, default):
    try:
        return float(text.rstrip("s")) if text else default
    except ValueError:
        return default


def _env_world():
    def num(name, default="0"):
        return int(os.environ.get(name) or default)
    generation = num("DISTRUN_EPOCH")
    return World(rank=num("RANK"), world_size=num("WORLD_SIZE", "1"), local_rank=num("LOCAL_RANK"),
                 local_world_size=num("LOCAL_WORLD_SIZE", "1"), group_rank=num("GROUP_RANK"),
                 group_world_size=num("GROUP_WORLD_SIZE", "1"), generation=generation, new=True, source=None,
                 lost=[], joined=[])


def _connect():
    global _channel
    if _channel is None:
        address = os.environ.get("DISTRUN_RECOVERY_SOCKET")
        if not address:
            raise NotInJobError("DISTRUN_RECOVERY_SOCKET is not set: run this program as a worker of "
                                "distrun --recovery in-process")
        _channel = _Channel(address)
        _channel.send("hello", version=_VERSION, pid=os.getpid(), generation=-1)
    return _channel


def _form(channel, world, env, prefix):
    """Initialises torch's default group for `world` under the store namespace `prefix`."""
    import torch.distributed as dist
    from . import _reset_default
    os.environ.update(env)
    _reset_default()  # distrun.set/get/barrier speak for this generation from now on
    timeout = _kwargs.get("timeout") or datetime.timedelta(minutes=30)
    host, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
    with channel._cv:
        channel.group_sockets = None
        channel.group_before = _sockets()
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        store = dist.TCPStore(host, port, is_master=False, timeout=timeout)
    else:
        store = dist.TCPStore(host, port, world.world_size, world.rank == 0, timeout)
    dist.init_process_group(_backend, store=dist.PrefixStore(prefix, store), rank=world.rank,
                            world_size=world.world_size, **_kwargs)
    with channel._cv:
        now = _sockets()
        channel.group_sockets = {fd: t for fd, t in now.items() if channel.group_before.get(fd) != t}
        channel.held = world.generation
        changed = channel.changed > world.generation
    if changed:
        # A notice came while the group formed: release what it opened, so that the first step fails.
        _shut_down(channel.group_sockets)
    channel.send("up", generation=world.generation)


def _tear_down(channel):
    """Aborts and destroys the default group, if any; this process then holds no group."""
    import torch.distributed as dist
    group = _current_group()
    if group is not None:
        _abort(group)
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    with channel._cv:
        channel.group_sockets = {}
        channel.group_before = {}


def _take_world(channel):
    """Forms the group of the newest world distrun handed out. A change announced while it forms (a peer of
    that world lost meanwhile) fails the forming: the group is torn down, distrun told this process is
    ready, and the next world is formed instead. Returns the World formed."""
    while True:
        world, env, prefix = channel.world
        try:
            _form(channel, world, env, prefix)
            return world
        except Exception:
            with channel._cv:
                newer = channel.changed > world.generation
            if not newer:
                raise
        _tear_down(channel)
        with channel._cv:
            channel.held = -1
            channel.waiting = True
            generation = channel.changed
        channel.send("ready", generation=generation)
        try:
            channel.wait(lambda: channel.world is not None and channel.world[0].generation >= channel.changed)
        finally:
            with channel._cv:
                channel.waiting = False


def init_process_group(backend=None, **kwargs):
    """torch.distributed.init_process_group for this generation's world; returns its World.

    `backend`: "gloo", "nccl" (default: nccl where CUDA is available, else gloo); a single backend, as
    recovering in place needs. Other keyword arguments go to torch (timeout, pg_options, ...), except
    init_method, store, rank and world_size, which distrun's world sets. A warm spare's worker blocks here
    until a lost node's ranks are given to it. Outside `--recovery in-process` this is torch's own call with
    the variables distrun set (env://)."""
    global _backend, _kwargs, _world
    import torch.distributed as dist
    taken = sorted(set(kwargs) & {"init_method", "store", "rank", "world_size"})
    if taken:
        raise ValueError(f"distrun.torch.init_process_group sets {', '.join(taken)} itself; leave them out")
    with _lock:
        _backend = backend or _default_backend()
        _kwargs = dict(kwargs)
        if _mode() != "in-process":
            dist.init_process_group(_backend, **_kwargs)
            _world = _env_world()
            return _world
        channel = _connect()
        channel.wait(lambda: channel.world is not None)
        _world = _take_world(channel)
        return _world


def world():
    """The World this process holds now (None before init_process_group)."""
    return _world


def world_changed():
    """Whether distrun announced a newer world than the one this process holds: a training loop may check it
    at a step's end and call recover() there rather than wait for a collective to fail. Never true outside
    --recovery in-process."""
    channel = _channel
    return channel is not None and channel.changed > channel.held


def recover(error=None, timeout=None):
    """For the `except` of a failed step: returns the next World once distrun has formed it.

    Waits up to `timeout` seconds (default: distrun's --recovery-timeout, DISTRUN_RECOVERY_TIMEOUT) for
    distrun's notice that the world changed; without one, re-raises `error` (a bug stays a bug; with no
    error, the current World is returned). Then aborts and destroys the process group, tells distrun this
    process is ready, waits for the new world, sets its variables in os.environ (RANK, WORLD_SIZE,
    LOCAL_RANK, GROUP_RANK, DISTRUN_EPOCH, ...) and initialises the group again under a fresh store
    namespace. Re-wrap DDP on the new group and take the state from `world.source` before the next step.

    The failed step's finished frames (those in `error`'s traceback) lose their local variables, so that the
    lost group's objects are freed at once. Under --recovery restart, re-raises `error`: distrun stops and
    starts the workers."""
    global _world
    if _mode() != "in-process":
        if error is not None:
            raise error
        raise FailedPreconditionError("distrun.torch.recover() recovers in place only under distrun "
                                      "--recovery in-process; under restart distrun starts the workers again")
    channel = _channel
    if channel is None:
        if os.environ.get("DISTRUN_RECOVERY_SOCKET"):
            raise FailedPreconditionError("distrun.torch.recover() before distrun.torch.init_process_group()")
        raise NotInJobError("distrun.torch.recover() outside a distrun job")
    if timeout is None:
        timeout = _timeout_seconds(os.environ.get("DISTRUN_RECOVERY_TIMEOUT"), 30.0)
    with _lock:
        if not channel.wait(lambda: channel.changed > channel.held, timeout):
            if error is not None:
                raise error
            return _world
        if error is not None and error.__traceback__ is not None:
            # The failed step's finished frames hold the lost group (torch's collective holds its work and
            # group): freed now, the group's store client closes its connections, which torch 1.13's would
            # otherwise poll at a core's full speed once the server closed them (node 0 lost).
            traceback.clear_frames(error.__traceback__)
        _tear_down(channel)
        with channel._cv:
            channel.held = -1 if _world is None else _world.generation
            channel.waiting = True
            generation = channel.changed
        channel.send("ready", generation=generation)
        try:
            channel.wait(lambda: channel.world is not None and channel.world[0].generation >= channel.changed)
        finally:
            with channel._cv:
                channel.waiting = False
        _world = _take_world(channel)
        return _world


def new_group(*args, **kwargs):
    """torch.distributed.new_group, with its sockets released like the default group's on a change of the
    world (a collective of a subgroup blocked on a lost peer fails at once too)."""
    import torch.distributed as dist
    channel = _channel
    before = _sockets()
    group = dist.new_group(*args, **kwargs)
    if channel is not None:
        with channel._cv:
            added = {fd: t for fd, t in _sockets().items() if before.get(fd) != t}
            if channel.group_sockets is not None:
                channel.group_sockets.update(added)
    return group
