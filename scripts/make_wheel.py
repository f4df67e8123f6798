#!/usr/bin/env python3
"""Packs distrun into a Python wheel from a release build: the `distrun` program and its sentinel (on the
environment's PATH once installed), and the `distrun` Python package with the self-contained client library
beside it (cmake/client_library.cmake: gRPC, protobuf, abseil and the C++ runtime linked in).

    scripts/make_wheel.py BUILD_DIR DEST_DIR      (scripts/build.sh wheel: build/release, dist)

Every ELF file it packs must need nothing but glibc; the platform tag names the newest glibc symbol version
any of them uses (manylinux_2_X). Built with Debian's python3-wheel (`wheel pack`), offline.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# What a program may need and still run on any glibc system of the tag's version or later.
GLIBC = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(distrun VERSION ([0-9.]+)", f.read()).group(1)


def needed(path):
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def glibc_version(path):
    """The newest GLIBC_x.y symbol version `path` needs, as (x, y)."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    versions = [tuple(int(n) for n in v.split(".")) for v in re.findall(r"\bGLIBC_([0-9]+\.[0-9]+)\b", out)]
    return max(versions, default=(2, 17))


def fail(message):
    sys.exit(f"make_wheel: {message}")


def main(argv):
    if len(argv) != 3:
        fail("usage: make_wheel.py BUILD_DIR DEST_DIR")
    build, dest = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    library = os.path.join(build, "wheel-lib", "libdistrun_client.so.0")
    files = {  # path in the wheel's tree -> file in the build or the source tree
        "distrun/libdistrun_client.so.0": library,
        # The sentinel and the runtime module beside the program, where distrun looks first: a directory of
        # the environment's own (bin), so that `pip uninstall` leaves no directory behind.
        "{data}/scripts/distrun": os.path.join(build, "distrun"),
        "{data}/scripts/distrun-sentinel": os.path.join(build, "distrun-sentinel"),
        "{data}/scripts/distrun-runtime.so": os.path.join(build, "distrun-runtime.so"),
    }
    for name in sorted(os.listdir(os.path.join(ROOT, "python", "distrun"))):
        if name.endswith(".py") and name != "_install.py":
            files[f"distrun/{name}"] = os.path.join(ROOT, "python", "distrun", name)
    for source in files.values():
        if not os.path.isfile(source):
            fail(f"{source} is missing: build it first (scripts/build.sh release; the client library needs the "
                 "Debian sources scripts/install-deps.sh fetches)")

    elves = [f for f in files.values() if open(f, "rb").read(4) == b"\x7fELF"]
    for elf in elves:
        outside = [lib for lib in needed(elf) if lib not in GLIBC]
        if outside:
            fail(f"{elf} needs {', '.join(outside)}: the wheel's programs must need glibc alone")
    major, minor = max(glibc_version(f) for f in elves)
    arch = os.uname().machine
    tag = f"py3-none-manylinux_{major}_{minor}_{arch}"

    version = project_version()
    data = f"distrun-{version}.data"
    info = f"distrun-{version}.dist-info"
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, f"distrun-{version}")
        for target, source in files.items():
            path = os.path.join(tree, target.format(data=data))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            shutil.copyfile(source, path)
            if source in elves:  # no symbols for debuggers: a third of the size
                subprocess.run(["strip", "--strip-unneeded", path], check=True)
            os.chmod(path, 0o755 if source in elves and "libdistrun_client" not in target else 0o644)
        os.makedirs(os.path.join(tree, info))
        with open(os.path.join(tree, info, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: distrun\nVersion: {version}\n"
                    "Summary: Launcher and cluster auto-detector for distributed GPU jobs, with the job's "
                    "key-value store, barriers and JAX integration for Python workers\n"
                    "Requires-Python: >=3.8\n")
        with open(os.path.join(tree, info, "WHEEL"), "w") as f:
            f.write(f"Wheel-Version: 1.0\nGenerator: distrun scripts/make_wheel.py\nRoot-Is-Purelib: false\n"
                    f"Tag: {tag}\n")
        os.makedirs(dest, exist_ok=True)
        subprocess.run([sys.executable, "-m", "wheel", "pack", "--dest-dir", dest, tree], check=True,
                       stdout=subprocess.DEVNULL)
    wheel = os.path.join(dest, f"distrun-{version}-{tag}.whl")
    if not os.path.isfile(wheel):
        fail(f"wheel pack did not write {wheel}")
    print(wheel)


if __name__ == "__main__":
    main(sys.argv)
