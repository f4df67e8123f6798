"""`python -m distrun ARGS` does what `distrun ARGS` does, where this environment's bin/ is not on PATH; a
script it runs with Python runs with this Python (PYTHON_EXEC, unless it is set already).

It runs (in its place: exec) the distrun program of this Python environment: the one the wheel put in the
environment's scripts directory (its bin/, or ~/.local/bin for pip install --user), else the one installed
with this module (cmake --install, the Debian package: PREFIX/bin beside PREFIX/lib/python3...), else
distrun on PATH.
"""
import os
import shutil
import sys
import sysconfig


def program():
    """The distrun program this module belongs to, or None."""
    candidates = []
    for scheme in (None, "posix_user"):
        try:
            scripts = sysconfig.get_path("scripts", scheme) if scheme else sysconfig.get_path("scripts")
        except KeyError:  # a Python without that scheme
            continue
        candidates.append(os.path.join(scripts, "distrun"))
    here = os.path.dirname(os.path.abspath(__file__))
    # PREFIX/lib/python3/dist-packages/distrun (Debian's /usr) or PREFIX/lib/python3.X/dist-packages/distrun
    candidates.append(os.path.normpath(os.path.join(here, "..", "..", "..", "..", "bin", "distrun")))
    candidates.append(shutil.which("distrun"))
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def main():
    path = program()
    # A script or module that distrun runs with Python (`distrun ... train.py`) runs with this Python, as
    # torchrun's do with the one that runs torchrun (unless PYTHON_EXEC names another).
    os.environ.setdefault("PYTHON_EXEC", sys.executable)
    if path is None:
        sys.stderr.write("distrun: error: no distrun program beside this Python module, in this environment's "
                         "scripts directory or on PATH; install the distrun wheel into this environment "
                         "(pip install distrun-*.whl)\n")
        return 1
    os.execv(path, [path] + sys.argv[1:])
    return 1  # not reached


if __name__ == "__main__":
    sys.exit(main())
