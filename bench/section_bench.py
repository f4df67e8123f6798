#!/usr/bin/env python3
"""The cost of a section's run (issue 48's goal: at most 1 us per enter + exit, no message per call), from
Python (`with distrun.section(...)`, the decorator) and from C (distrun_section_enter/exit), each in a real
one-worker distrun job so that the runs land on a real progress board. Prints the median of 5 rounds of N
runs, less the same loop without the section.

    python3 bench/section_bench.py [--build build/release] [--runs 1000000] [--python /usr/bin/python3]
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PY_WORKER = r"""
import statistics, sys, time
import distrun
runs = int(sys.argv[1])

def loop_empty():
    t = time.perf_counter_ns()
    for _ in range(runs):
        pass
    return time.perf_counter_ns() - t

def loop_with():
    t = time.perf_counter_ns()
    for _ in range(runs):
        with distrun.section("fwd"):
            pass
    return time.perf_counter_ns() - t

fwd = distrun.section("fwd")
def loop_reused():
    t = time.perf_counter_ns()
    for _ in range(runs):
        with fwd:
            pass
    return time.perf_counter_ns() - t

@distrun.section("step")
def step():
    pass

def plain():
    pass

def loop_decorated(f):
    t = time.perf_counter_ns()
    for _ in range(runs):
        f()
    return time.perf_counter_ns() - t

def median(f, *a):
    return statistics.median(f(*a) for _ in range(5)) / runs

empty = median(loop_empty)
call = median(loop_decorated, plain)
print(f"python with distrun.section(name): {median(loop_with) - empty:7.0f} ns per run (enter + exit)")
print(f"python with a reused section:      {median(loop_reused) - empty:7.0f} ns per run")
print(f"python @distrun.section function:  {median(loop_decorated, step) - call:7.0f} ns per call more than a plain call")
"""

C_WORKER = r"""
#include <distrun/client.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static long long now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
static int cmp(const void* a, const void* b) { double x = *(const double*)a, y = *(const double*)b; return x < y ? -1 : x > y; }
int main(int argc, char** argv) {
  long runs = atol(argv[1]);
  if (distrun_section_enter("fwd") != 0 || distrun_section_exit() != 0) { fprintf(stderr, "not in a job\n"); return 1; }
  double ns[5];
  for (int round = 0; round < 5; ++round) {
    long long t = now();
    for (long i = 0; i < runs; ++i) { distrun_section_enter("fwd"); distrun_section_exit(); }
    ns[round] = (double)(now() - t) / runs;
  }
  qsort(ns, 5, sizeof ns[0], cmp);
  printf("C distrun_section_enter + exit:    %7.0f ns per run\n", ns[2]);
  return 0;
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build", "release"))
    ap.add_argument("--runs", type=int, default=1_000_000)
    ap.add_argument("--python", default="/usr/bin/python3")
    a = ap.parse_args()
    distrun = os.path.join(a.build, "distrun")
    library = os.path.join(a.build, "lib", "libdistrun_client.so.0")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": os.path.join(ROOT, "python"), "DISTRUN_CLIENT_LIBRARY": library}
    with tempfile.TemporaryDirectory() as tmp:
        worker = os.path.join(tmp, "worker.py")
        with open(worker, "w") as f:
            f.write(PY_WORKER)
        subprocess.run([distrun, "--nproc-per-node", "1", "--", a.python, worker, str(a.runs)], env=env, check=True)
        source = os.path.join(tmp, "worker.c")
        with open(source, "w") as f:
            f.write(C_WORKER)
        program = os.path.join(tmp, "worker")
        subprocess.run(["cc", "-O2", "-o", program, source, "-I", os.path.join(ROOT, "runtime", "include"),
                        library, "-Wl,-rpath," + os.path.dirname(library)], check=True)
        subprocess.run([distrun, "--nproc-per-node", "1", "--", program, str(a.runs)], env=env, check=True)
    subprocess.run(["sh", "-c", "nproc; uname -r; " + a.python + " --version"], check=False)


if __name__ == "__main__":
    sys.exit(main())
