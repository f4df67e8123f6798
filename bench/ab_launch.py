#!/usr/bin/python3
"""Two distrun builds alternated: whole-process time of `DISTRUN --nproc-per-node N -- /bin/true`.

    bench/ab_launch.py OLD_DISTRUN NEW_DISTRUN [--workers 8] [--rounds 300] [--detect]

Each round runs A then B (then B then A in the next round, so neither always runs right after the
other's cleanup); posix_spawn and waitpid from one process, stdin on /dev/null. Prints the medians and
the ratio B/A. With --detect, times `--detect --format json` instead of a launch.
"""

import argparse
import os
import statistics
import time


def run_once(argv, env, stdin):
    t = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=[
        (os.POSIX_SPAWN_DUP2, stdin, 0),
        (os.POSIX_SPAWN_DUP2, stdin, 1),
    ])
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - t
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {status}")
    return elapsed


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=300)
    p.add_argument("--detect", action="store_true")
    args = p.parse_args()
    tail = ["--detect", "--format", "json"] if args.detect else [
        "--nproc-per-node", str(args.workers), "--", "/bin/true"]
    commands = {"A": [os.path.realpath(args.old)] + tail, "B": [os.path.realpath(args.new)] + tail}
    env = dict(os.environ)
    stdin = os.open("/dev/null", os.O_RDWR)
    times = {"A": [], "B": []}
    for i in range(args.rounds):
        for key in ("A", "B") if i % 2 == 0 else ("B", "A"):
            times[key].append(run_once(commands[key], env, stdin))
    a, b = (statistics.median(times[k]) * 1000 for k in ("A", "B"))
    print(f"{' '.join(tail)}, {args.rounds} alternated rounds, medians:")
    print(f"  A {commands['A'][0]}: {a:.2f} ms")
    print(f"  B {commands['B'][0]}: {b:.2f} ms")
    print(f"  B/A {b / a:.3f}")


if __name__ == "__main__":
    main()
