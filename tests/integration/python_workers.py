"""How tests run Python workers that import the `distrun` module from the source tree (python/) with the
build's client library, in the release and the sanitizer builds alike."""
import os
import subprocess
import unittest

from distrun_harness import DISTRUN
from launch_helpers import PYTHON

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MODULE_DIR = os.path.join(ROOT, "python")
BUILD = os.path.dirname(DISTRUN)
LIBRARY = os.path.join(BUILD, "lib", "libdistrun_client.so.0")


def cache_value(name):
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return None


def asan_options_without_leak_check():
    """ASAN_OPTIONS as this test runs with, and no leak check: for a process that cannot have one."""
    return ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))


def python_command():
    """The interpreter for workers. A sanitizer build's library needs the sanitizer runtimes loaded first
    into the (uninstrumented) interpreter, whose own allocations are never freed by design: no leak check."""
    if cache_value("DISTRUN_SANITIZE") != "ON":
        return [PYTHON]
    compiler = cache_value("CMAKE_CXX_COMPILER") or "c++"
    runtimes = [subprocess.run([compiler, f"-print-file-name={name}"], capture_output=True, text=True,
                               check=True).stdout.strip() for name in ("libasan.so", "libubsan.so")]
    for path in runtimes:
        if not os.path.isabs(path):
            raise unittest.SkipTest(f"{compiler} does not know where {path} is")
    return ["env", "LD_PRELOAD=" + ":".join(runtimes), "ASAN_OPTIONS=" + asan_options_without_leak_check(), PYTHON]


def module_env(**extra):
    """What a worker needs to import the module from the source tree and load the build's library."""
    env = {"PYTHONPATH": MODULE_DIR, "DISTRUN_CLIENT_LIBRARY": LIBRARY, "PYTHONDONTWRITEBYTECODE": "1"}
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}
