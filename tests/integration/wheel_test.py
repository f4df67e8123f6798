"""The Python wheel (scripts/make_wheel.py, `scripts/build.sh wheel`): packed from this build, installed
offline into fresh virtual environments of a Python that is not Debian's (a python.org-style build under
/root/.pyenv) and of Debian's; the environment's own `distrun` runs a two-worker job whose workers use
`import distrun` (the key-value store, a barrier, progress, their identity) with no system distrun,
LD_LIBRARY_PATH or PYTHONPATH; every ELF file in the wheel keeps to manylinux_2_28 (glibc alone, no symbol
version above GLIBC_2.28, no C++ runtime's); make_wheel.py refuses programs that do not, naming file, version and
symbol; the client libraries export only the C API; `pip uninstall` leaves nothing behind. The wheel in an
older userland: older_userland_test.py."""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(DISTRUN)
GLIBC = {"libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2"}
MAKE_WHEEL = os.path.join(REPO, "scripts", "make_wheel.py")

# What each worker does with the module, and where its pieces came from.
TRAIN = r"""
import os, sys
import distrun
r, n = distrun.rank(), distrun.world_size()
distrun.set("key/%d" % r, "value %d" % r)
distrun.barrier("all-set")
values = [distrun.get("key/%d" % i, timeout=30, text=True) for i in range(n)]
sentinel = ""
for pid in os.listdir("/proc"):  # distrun's sentinel: a child of the worker's parent
    try:
        with open("/proc/%s/stat" % pid) as f:
            if int(f.read().rsplit(")", 1)[1].split()[1]) == os.getppid() and int(pid) != os.getpid():
                exe = os.readlink("/proc/%s/exe" % pid)
                if exe.endswith("distrun-sentinel"):
                    sentinel = exe
    except (OSError, ValueError):
        pass
print("rank %d/%d local %d values %s progress %s lib %s python %s sentinel %s" % (
    r, n, distrun.local_rank(), ",".join(values), distrun.progress(1), distrun.library_path(), sys.executable,
    sentinel), flush=True)
"""


def sanitized_build():
    try:
        with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
            return re.search(r"^DISTRUN_SANITIZE:BOOL=ON$", f.read(), re.M) is not None
    except OSError:
        return False


def other_pythons():
    """CPythons that are not Debian's among those the wheel supports (3.8 and later), oldest first."""
    found = []
    for path in glob.glob("/root/.pyenv/versions/3.*/bin/python3"):
        m = re.search(r"/3\.(\d+)\.(\d+)/", path)
        if m and int(m.group(1)) >= 8:
            found.append(((int(m.group(1)), int(m.group(2))), path))
    return [path for _, path in sorted(found)]


def files_under(root):
    out = set()
    for base, dirs, names in os.walk(root):
        out.update(os.path.join(base, n) for n in dirs + names)
    return out


def pack_wheel(directory):
    """The wheel `scripts/build.sh wheel` wrote (scripts/test.sh names it), else one packed here into `directory`."""
    if os.environ.get("DISTRUN_WHEEL"):
        return os.environ["DISTRUN_WHEEL"]
    r = subprocess.run(["/usr/bin/python3", MAKE_WHEEL, BUILD, os.path.join(directory, "dist")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"make_wheel.py failed: {r.stdout}{r.stderr}")
    return r.stdout.strip().splitlines()[-1]


def symbol_versions(path):
    """{(family, version)} of the symbols an ELF file takes from versioned libraries, e.g. ("GLIBC", (2, 17))."""
    out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
    return {(family, tuple(int(n) for n in version.split(".")))
            for family, version in re.findall(r"\*UND\*.*\b(GLIBC|GLIBCXX|CXXABI|GCC)_([0-9.]+)", out)}


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if sanitized_build():
            raise unittest.SkipTest("the wheel is packed from a release build (its client library links gRPC "
                                    "statically, which sanitizer builds do not)")
        cls.tmp = tempfile.TemporaryDirectory(prefix="distrun-wheel-")
        cls.wheel = pack_wheel(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_name_states_the_glibc_it_needs(self):
        name = os.path.basename(self.wheel)
        m = re.fullmatch(r"distrun-([0-9.]+)-py3-none-manylinux_2_28_x86_64\.whl", name)
        self.assertIsNotNone(m, name)
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
        version = m.group(1)
        self.assertTrue({"distrun/__init__.py", "distrun/jax.py", "distrun/libdistrun_client.so.0",
                         f"distrun-{version}.data/scripts/distrun", f"distrun-{version}.data/scripts/distrun-sentinel",
                         f"distrun-{version}.data/scripts/distrun-runtime.so",
                         f"distrun-{version}.dist-info/RECORD"} <= names, names)

    def test_every_elf_file_needs_glibc_alone(self):
        with tempfile.TemporaryDirectory() as d:
            with zipfile.ZipFile(self.wheel) as z:
                z.extractall(d)
            elves = []
            for path in files_under(d):
                if os.path.isfile(path):
                    with open(path, "rb") as f:
                        if f.read(4) == b"\x7fELF":
                            elves.append(path)
            self.assertEqual(len(elves), 4, elves)  # distrun, its sentinel and runtime module, the client library
            for path in elves:
                out = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True, check=True).stdout
                needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))
                self.assertTrue(needed and needed <= GLIBC, f"{os.path.relpath(path, d)} needs {sorted(needed)}")
                versions = symbol_versions(path)
                self.assertIn(("GLIBC", (2, 2, 5)), versions, path)  # it was read
                too_new = sorted(v for v in versions if v[0] != "GLIBC" or v[1][:2] > (2, 28))
                self.assertEqual(too_new, [], os.path.relpath(path, d))

    def test_make_wheel_refuses_programs_that_need_a_newer_glibc(self):
        # The build's own programs, linked against Debian 12's glibc, in place of the wheel's.
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "build", "wheel"))
            for name in ("distrun", "distrun-sentinel", "distrun-runtime.so"):
                shutil.copy(os.path.join(BUILD, name), os.path.join(d, "build", "wheel", name))
            shutil.copy(os.path.join(BUILD, "wheel", "libdistrun_client.so.0"), os.path.join(d, "build", "wheel"))
            r = subprocess.run(["/usr/bin/python3", MAKE_WHEEL, os.path.join(d, "build"), os.path.join(d, "dist")],
                               capture_output=True, text=True)
            self.assertNotEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("make_wheel: not a manylinux_2_28 wheel, nothing written", r.stderr)
            self.assertRegex(r.stderr, r"wheel/distrun needs GLIBC_2\.3[4-9]: .*__libc_start_main")
            self.assertRegex(r.stderr, r"wheel/distrun-runtime\.so needs GLIBC_2\.3[4-9]: ")
            self.assertNotIn("wheel/libdistrun_client.so.0 needs GLIBC_", r.stderr)  # the wheel's own passes
            self.assertFalse(os.path.exists(os.path.join(d, "dist")), os.listdir(d))

    def test_client_libraries_export_only_the_c_api(self):
        with tempfile.TemporaryDirectory() as d:
            with zipfile.ZipFile(self.wheel) as z:
                wheel_library = z.extract("distrun/libdistrun_client.so.0", d)
            for library in (wheel_library, os.path.join(BUILD, "lib", "libdistrun_client.so.0")):
                out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True,
                                     check=True).stdout
                symbols = [line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()]
                # The version node (an absolute symbol) and the C API, nothing else.
                others = [s for s in symbols if not s.startswith("distrun_") and s != "DISTRUN_CLIENT_0"]
                self.assertEqual(others, [], library)
                self.assertIn("distrun_kv_set", symbols)

    def venv_job(self, python):
        """A fresh venv of `python`: the wheel installed offline, a 2-worker job, uninstalled."""
        with tempfile.TemporaryDirectory(prefix="distrun-venv-") as d:
            venv = os.path.join(d, "venv")
            env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": d, "PIP_NO_CACHE_DIR": "1",
                   "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            subprocess.run([python, "-m", "venv", venv], env=env, check=True, capture_output=True)
            before = files_under(venv)
            r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", self.wheel], env=env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            script = os.path.join(d, "train.py")
            with open(script, "w") as f:
                f.write(TRAIN)
            # As in an activated venv: its bin first, nothing of distrun elsewhere.
            job_env = dict(env, PATH=os.path.join(venv, "bin") + ":" + env["PATH"])
            r = subprocess.run([os.path.join(venv, "bin", "distrun"), "--nproc-per-node", "2", "--tag-output", "off",
                                "--", "python", script], env=job_env, capture_output=True, text=True, timeout=120,
                               stdin=subprocess.DEVNULL)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            lines = sorted(r.stdout.splitlines())
            site = glob.glob(os.path.join(venv, "lib", "python3.*", "site-packages"))[0]
            for rank, line in enumerate(lines):
                self.assertEqual(line, f"rank {rank}/2 local {rank} values value 0,value 1 progress True "
                                       f"lib {site}/distrun/libdistrun_client.so.0 python {venv}/bin/python "
                                       f"sentinel {venv}/bin/distrun-sentinel")
            self.assertEqual(len(lines), 2, r.stdout + r.stderr)
            # `python -m distrun`, the venv neither active nor on PATH, torchrun's form: the script runs with
            # the venv's Python, which imports the venv's distrun.
            r = subprocess.run([os.path.join(venv, "bin", "python"), "-m", "distrun", "--nproc_per_node=2",
                                "--tag-output=off", script], env=env, capture_output=True, text=True,
                               timeout=120, stdin=subprocess.DEVNULL, cwd=d)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(sorted(r.stdout.splitlines()), lines)
            r = subprocess.run([os.path.join(venv, "bin", "pip"), "uninstall", "-y", "distrun"], env=env,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            # pip compiles its own modules as it runs; nothing else may stay.
            left = [p for p in files_under(venv) - before if "/site-packages/pip/" not in p]
            self.assertEqual(left, [])

    def test_a_venv_of_a_python_that_is_not_debians(self):
        pythons = other_pythons()
        self.assertTrue(pythons, "no CPython 3.8+ under /root/.pyenv/versions to test the wheel with")
        self.venv_job(pythons[-1])

    def test_a_venv_of_the_oldest_python_it_supports(self):
        pythons = [p for p in other_pythons() if "/3.8." in p]
        self.assertTrue(pythons, "no CPython 3.8 under /root/.pyenv/versions to test the wheel with")
        self.venv_job(pythons[0])

    def test_an_archive_that_left_the_mirror_is_named_with_what_to_do(self):
        # A mirror that holds nothing (a closed port): as when bullseye moves to archive.debian.org.
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([os.path.join(REPO, "scripts", "bullseye.sh"), "sysroot", os.path.join(d, "sysroot")],
                               env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                                    "DISTRUN_BULLSEYE_MIRROR": "http://127.0.0.1:9/debian"},
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("could not be fetched from http://127.0.0.1:9/debian", r.stderr)
            self.assertIn("DISTRUN_BULLSEYE_MIRROR=http://archive.debian.org/debian", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "sysroot")))

    def test_a_venv_of_debians_python(self):
        self.venv_job("/usr/bin/python3")


if __name__ == "__main__":
    unittest.main(verbosity=2)
