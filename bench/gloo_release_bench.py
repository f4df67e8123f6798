#!/usr/bin/python3
"""How to release a Gloo collective blocked on a frozen peer (Gloo cannot abort, pytorch#130345): the ways
INPROCESS_FACTS.md lists, timed with Debian's torch 1.13 on this machine. Two gloo ranks in processes of their
own; rank 1 stops itself (SIGSTOP) while rank 0 waits in a 4 MB all_reduce; then rank 0's call is released by

  shutdown   a thread of rank 0 shuts down the group's own sockets (those that appeared while the group
             formed): what distrun.torch does on distrun's notice
  pidfd      rank 0's parent duplicates those sockets with pidfd_getfd and shuts them down (what distrun
             itself could do from outside the worker)
  kill       rank 1 is killed (its kernel resets the connections): what fencing the frozen node comes to
  timeout    nothing: the group's own timeout (here 2 s; torch's default is 30 min) ends the call

and the time from the release to rank 0's exception is taken, then the time to form a new group (destroy,
then init under a fresh PrefixStore). Each way --trials times.

    bench/gloo_release_bench.py --trials 20
"""
import argparse
import ctypes
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

CHILD = r"""
import datetime, os, signal, socket, sys, time
import torch, torch.distributed as dist
rank, port, way = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
def sockets():
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if t.startswith("socket:"):
            out[int(fd)] = t
    return out
store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, datetime.timedelta(seconds=30))
before = sockets()
timeout = datetime.timedelta(seconds=2 if way == "timeout" else 60)
dist.init_process_group("gloo", store=dist.PrefixStore("g0", store), rank=rank, world_size=2, timeout=timeout)
group = [fd for fd, t in sockets().items() if before.get(fd) != t]
t = torch.ones(1 << 20)
dist.all_reduce(t)
if rank == 1:
    print("stopping", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
    time.sleep(3600)
print("group " + ",".join(map(str, group)) + f" {time.monotonic():.6f}", flush=True)
if way == "shutdown":
    import threading
    def release():
        sys.stdin.readline()  # the parent says when
        print(f"released {time.monotonic():.6f}", flush=True)
        for fd in group:
            s = socket.socket(fileno=os.dup(fd))
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
    threading.Thread(target=release, daemon=True).start()
try:
    dist.all_reduce(t)
    print("no error", flush=True)
except Exception:
    print(f"raised {time.monotonic():.6f}", flush=True)
t0 = time.monotonic()
dist.destroy_process_group()
dist.init_process_group("gloo", store=dist.PrefixStore("g1", store), rank=0, world_size=1)
dist.all_reduce(t)
print(f"reformed {time.monotonic() - t0:.6f}", flush=True)
"""

SYS_pidfd_open, SYS_pidfd_getfd = 434, 438


def pidfd_shutdown(pid, fds):
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = libc.syscall(SYS_pidfd_open, pid, 0)
    if pidfd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_open")
    try:
        for fd in fds:
            dup = libc.syscall(SYS_pidfd_getfd, pidfd, fd, 0)
            if dup < 0:
                raise OSError(ctypes.get_errno(), "pidfd_getfd")
            s = socket.socket(fileno=dup)
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
    finally:
        os.close(pidfd)


def one(way, python):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = [subprocess.Popen([python, "-c", CHILD, str(r), str(port), way], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for r in (0, 1)]
    r0, r1 = procs
    try:
        assert r1.stdout.readline().strip() == "stopping"
        line = r0.stdout.readline().split()
        group, waiting_since = [int(x) for x in line[1].split(",")], float(line[2])
        time.sleep(0.3)  # rank 0 waits in its all_reduce
        if way == "shutdown":
            r0.stdin.write("go\n")
            r0.stdin.flush()
            released = float(r0.stdout.readline().split()[1])
        else:
            released = time.monotonic() if way != "timeout" else waiting_since  # the timeout counts from there
            if way == "pidfd":
                pidfd_shutdown(r0.pid, group)
            elif way == "kill":
                r1.kill()
        raised = r0.stdout.readline().split()
        reformed = float(r0.stdout.readline().split()[1])
        return float(raised[1]) - released, reformed
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--ways", default="shutdown,pidfd,kill,timeout")
    args = parser.parse_args()
    results = {}
    for way in args.ways.split(","):
        released, reformed = [], []
        for _ in range(args.trials):
            a, b = one(way, args.python)
            released.append(a)
            reformed.append(b)
        results[way] = {"released_median_ms": round(statistics.median(released) * 1000, 2),
                        "released_max_ms": round(max(released) * 1000, 2),
                        "reformed_median_ms": round(statistics.median(reformed) * 1000, 2)}
        print(way, json.dumps(results[way]), flush=True)
    print(json.dumps(results))


if __name__ == "__main__":
    sys.exit(main())
