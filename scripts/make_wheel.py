#!/usr/bin/env python3
"""Packs distrun into a Python wheel: the `distrun` program, its sentinel and runtime module (on the
environment's PATH once installed), and the `distrun` Python package with the self-contained client library
beside it. The programs and the library are those cmake/wheel.cmake links for the wheel (BUILD_DIR/wheel):
gRPC, protobuf, abseil and the C++ runtime linked in, glibc linked as 2.31's.

    scripts/make_wheel.py BUILD_DIR DEST_DIR      (scripts/build.sh wheel: build/release, dist)

The wheel's platform tag is manylinux_2_28 (PEP 600: glibc 2.28 or later, as PyTorch's wheels since 2.7).
Before it writes anything it checks every ELF file against that policy as auditwheel does (auditwheel cannot
be installed here): no GLIBC symbol version above 2.28; no GLIBCXX, CXXABI or GCC version at all (the C++
runtime is linked in); no library outside the policy's list; no x86-64 ISA level above the baseline. A file
that breaks it is named with each symbol and version, and no wheel is written. Built with Debian's
python3-wheel (`wheel pack`), offline.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICY = "manylinux_2_28"
GLIBC_MAX = (2, 28)
# auditwheel's lib_whitelist for manylinux_2_28 (policy/manylinux-policy.json) but the X11/GL/glib libraries,
# which no program of distrun's would need; the dynamic loader (ld-linux*) is always allowed, as there.
ALLOWED_LIBRARIES = {
    "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0", "libdl.so.2", "librt.so.1", "libanl.so.1",
    "libnsl.so.1", "libutil.so.1", "libresolv.so.2", "libgcc_s.so.1", "libstdc++.so.6", "libatomic.so.1",
    "libz.so.1", "libexpat.so.1",
}


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(distrun VERSION ([0-9.]+)", f.read()).group(1)


def needed(path):
    out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def versioned_needs(path):
    """[(family, (major, minor[, patch]), symbol)] for every symbol `path` takes from a versioned library."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    needs = []
    for family, version, symbol in re.findall(r"\*UND\*\s+\S+\s+(?:\S+\s+)?\(?([A-Z]+)_([0-9.]+)\)?\s+(\S+)$",
                                              out, re.M):
        needs.append((family, tuple(int(n) for n in version.split(".")), symbol))
    return needs


def isa_levels(path):
    """The x86-64 ISA levels beyond the baseline that `path` says it needs (GNU_PROPERTY_X86_ISA_1_NEEDED)."""
    out = subprocess.run(["readelf", "-nW", path], capture_output=True, text=True, check=True).stdout
    levels = []
    for line in re.findall(r"x86 ISA needed: (.*)", out):
        levels += [level.strip() for level in line.split(",") if level.strip() != "x86-64-baseline"]
    return levels


def policy_breaches(path):
    """What in `path` breaks the wheel's policy, one line each; empty when nothing does."""
    breaches = []
    for lib in needed(path):
        if lib not in ALLOWED_LIBRARIES and not lib.startswith("ld-linux"):
            breaches.append(f"needs {lib}, which {POLICY} does not allow (link it in, or drop what needs it)")
    too_new = {}
    for family, version, symbol in versioned_needs(path):
        if family == "GLIBC" and version[:2] > GLIBC_MAX:
            too_new.setdefault(f"GLIBC_{'.'.join(map(str, version))}", []).append(symbol)
        elif family in ("GLIBCXX", "CXXABI", "GCC"):
            too_new.setdefault(f"{family}_{'.'.join(map(str, version))}", []).append(symbol)
    for version, symbols in sorted(too_new.items()):
        names = sorted(set(symbols))
        more = f" and {len(names) - 5} more" if len(names) > 5 else ""
        breaches.append(f"needs {version}: {', '.join(names[:5])}{more}")
    for level in isa_levels(path):
        breaches.append(f"needs the {level} instruction set; {POLICY} wheels run on any x86-64")
    return breaches


def glibc_floor(path):
    """The newest GLIBC version `path` needs, as (major, minor)."""
    versions = [v[:2] for family, v, _ in versioned_needs(path) if family == "GLIBC"]
    return max(versions, default=(2, 2))


def fail(message):
    sys.exit(f"make_wheel: {message}")


def main(argv):
    if len(argv) != 3:
        fail("usage: make_wheel.py BUILD_DIR DEST_DIR")
    build, dest = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    wheel_build = os.path.join(build, "wheel")
    files = {  # path in the wheel's tree -> file in the build or the source tree
        "distrun/libdistrun_client.so.0": os.path.join(wheel_build, "libdistrun_client.so.0"),
        # The sentinel and the runtime module beside the program, where distrun looks first: a directory of
        # the environment's own (bin), so that `pip uninstall` leaves no directory behind.
        "{data}/scripts/distrun": os.path.join(wheel_build, "distrun"),
        "{data}/scripts/distrun-sentinel": os.path.join(wheel_build, "distrun-sentinel"),
        "{data}/scripts/distrun-runtime.so": os.path.join(wheel_build, "distrun-runtime.so"),
    }
    for name in sorted(os.listdir(os.path.join(ROOT, "python", "distrun"))):
        if name.endswith(".py") and name != "_install.py":
            files[f"distrun/{name}"] = os.path.join(ROOT, "python", "distrun", name)
    for source in files.values():
        if not os.path.isfile(source):
            fail(f"{source} is missing: build it first (scripts/build.sh wheel; the wheel's programs need the "
                 "Debian sources and the glibc 2.31 sysroot that scripts/install-deps.sh fetches)")

    elves = [f for f in files.values() if open(f, "rb").read(4) == b"\x7fELF"]
    broken = []
    for elf in elves:
        broken += [f"  {os.path.relpath(elf, build)} {breach}" for breach in policy_breaches(elf)]
        major, minor = glibc_floor(elf)
        print(f"make_wheel: {os.path.relpath(elf, build)} needs glibc {major}.{minor}", file=sys.stderr)
    if broken:
        fail(f"not a {POLICY} wheel, nothing written:\n" + "\n".join(broken))
    tag = f"py3-none-{POLICY}_{os.uname().machine}"

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
