"""A small stand-in for XLA's coordination service (jaxlib's get_distributed_runtime_service/_client).

Protocol (one JSON object per line over TCP): a client sends {"id": process_id, "n": num_processes}. The
service refuses, with an error line and a close, a count different from its own, an id outside
[0, num_processes) and an id that is already registered. When every id of 0..n-1 has registered it answers
every client with {"ids": [0, ..., n-1]} (process 0's own client last). A client retries its connection and
waits for that answer until `init_timeout` seconds have passed since connect() began.

Every thread is a daemon: nothing here keeps a process alive after its main thread ends.
"""
import errno
import json
import socket
import threading
import time


class XlaRuntimeError(RuntimeError):
    """Stand-in for jaxlib's XlaRuntimeError (a RuntimeError whose text starts with a status code)."""


def _task(task):
    return f"/job:jax_worker/replica:0/task:{task}"


def split_address(address):
    """'host:port', '[v6]:port' -> (host, port)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise XlaRuntimeError(f"INVALID_ARGUMENT: could not parse address {address!r}; expected host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


def _listen(host, port):
    def bound(family, sockaddr, dual_stack=False):
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if dual_stack:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(sockaddr)
            sock.listen(128)
            return sock
        except BaseException:
            sock.close()
            raise

    if host in ("", "::"):
        # All interfaces: IPv6 dual-stack, or IPv4 where the host has no IPv6.
        try:
            return bound(socket.AF_INET6, ("::", port), dual_stack=True)
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise
            return bound(socket.AF_INET, ("0.0.0.0", port))
    last = None
    for family, _, _, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                        flags=socket.AI_PASSIVE):
        try:
            return bound(family, sockaddr)
        except OSError as e:
            last = e
    raise last if last else OSError(f"no address for {host}")


def _send(conn, message):
    try:
        conn.sendall((json.dumps(message) + "\n").encode())
    except OSError:
        pass


class DistributedRuntimeService:
    def __init__(self, address, num_nodes):
        self.address = address
        self.num_nodes = num_nodes
        host, port = split_address(address)
        try:
            self._sock = _listen(host, port)
        except OSError as e:
            raise XlaRuntimeError(f"UNKNOWN: Failed to start the coordination service on {address}: {e}") from None
        self._lock = threading.Lock()
        self._registered = {}
        self._complete = False
        threading.Thread(target=self._accept, name="standin-coordination-service", daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _refuse(self, conn, error):
        _send(conn, {"error": error})
        conn.close()

    def _serve(self, conn):
        reader = conn.makefile("rb")
        try:
            message = json.loads(reader.readline() or b"null")
            task, count = int(message["id"]), int(message["n"])
        except (OSError, ValueError, TypeError, KeyError):
            conn.close()
            return
        with self._lock:
            if count != self.num_nodes:
                return self._refuse(conn, (
                    f"INVALID_ARGUMENT: {_task(task)} joined a job of {count} processes, but the coordination "
                    f"service at {self.address} was started for {self.num_nodes}"))
            if not 0 <= task < self.num_nodes:
                return self._refuse(conn, (
                    f"INVALID_ARGUMENT: Unexpected task registered with task_name={_task(task)}: the job has "
                    f"tasks 0..{self.num_nodes - 1}"))
            if task in self._registered:
                return self._refuse(conn, (
                    f"ALREADY_EXISTS: {_task(task)} is already registered with the coordination service: two "
                    f"processes were given process_id={task}"))
            self._registered[task] = conn
            if len(self._registered) == self.num_nodes:
                self._complete = True
                ids = sorted(self._registered)
                for other in sorted(ids, key=lambda t: t == 0):
                    _send(self._registered[other], {"ids": ids})
        # Wait for the client to go away; one that leaves before the job is complete frees its id.
        try:
            while reader.readline():
                pass
        except OSError:
            pass
        with self._lock:
            if not self._complete and self._registered.get(task) is conn:
                del self._registered[task]
        conn.close()

    def shutdown(self):
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            for conn in self._registered.values():
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


class DistributedRuntimeClient:
    def __init__(self, address, node_id, init_timeout, num_processes):
        self.address = address
        self.node_id = node_id
        self.init_timeout = init_timeout
        self.num_processes = num_processes
        self.all_ids = None  # stand-in extra: the ids the service answered with
        self._sock = None

    def connect(self):
        host, port = split_address(self.address)
        deadline = time.monotonic() + self.init_timeout
        last = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise XlaRuntimeError(
                    f"DEADLINE_EXCEEDED: {_task(self.node_id)} could not reach the coordination service at "
                    f"{self.address} within {self.init_timeout} s: {last}")
            try:
                sock = socket.create_connection((host, port), timeout=min(left, 5.0))
                break
            except OSError as e:
                last = e
                time.sleep(min(0.1, max(left, 0)))
        _send(sock, {"id": self.node_id, "n": self.num_processes})
        reader = sock.makefile("rb")
        try:
            sock.settimeout(max(deadline - time.monotonic(), 0.001))
            line = reader.readline()
        except socket.timeout:
            sock.close()
            raise XlaRuntimeError(
                f"DEADLINE_EXCEEDED: Barrier timed out: {_task(self.node_id)} registered with the coordination "
                f"service at {self.address}, but not all {self.num_processes} tasks joined within "
                f"{self.init_timeout} s") from None
        except OSError as e:
            sock.close()
            raise XlaRuntimeError(f"UNAVAILABLE: lost the coordination service at {self.address}: {e}") from None
        if not line:
            sock.close()
            raise XlaRuntimeError(f"UNAVAILABLE: the coordination service at {self.address} closed the connection")
        answer = json.loads(line)
        if "error" in answer:
            sock.close()
            raise XlaRuntimeError(answer["error"])
        sock.settimeout(None)
        self._sock = sock
        self.all_ids = answer["ids"]

    def shutdown(self):
        if self._sock is not None:
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None


def get_distributed_runtime_service(address, num_nodes, *args, **kwargs):
    """jaxlib: starts the service, listening on `address`. Extra arguments (heartbeats...) are accepted."""
    return DistributedRuntimeService(address, num_nodes)


def get_distributed_runtime_client(address, node_id, *args, init_timeout=300, standin_num_processes=None,
                                   **kwargs):
    """jaxlib: a client of the service at `address`. The stand-in also sends the process count it was given
    (standin_num_processes) so that a count that differs from process 0's is refused."""
    return DistributedRuntimeClient(address, node_id, init_timeout, standin_num_processes)
