"""`cmake --install` into a scratch prefix gives a usable distrun: the program, its man page and completion,
the client library that examples/cpp builds against with find_package(distrun) and with pkg-config, and the
Python module that loads it."""
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402
from python_workers import python_command  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(DISTRUN)
EXAMPLES = os.path.join(ROOT, "examples", "cpp")
HEADER = os.path.join(ROOT, "runtime", "include", "distrun", "client.h")
# The tools see only the build's own environment: no CMAKE_PREFIX_PATH or PKG_CONFIG_PATH of the caller.
BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root")}


def sh(args, env=None, cwd=None, check=True, timeout=120):
    full_env = dict(BASE_ENV)
    full_env.update(env or {})
    r = subprocess.run(args, env=full_env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def cache_value(name):
    with open(os.path.join(BUILD, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return None


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(distrun VERSION ([0-9.]+)", f.read()).group(1)


def dynamic_section(path):
    return sh(["readelf", "-d", path]).stdout


def needed(path):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic_section(path))


class Install(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(os.path.join(BUILD, "CMakeCache.txt")):
            raise unittest.SkipTest(f"{BUILD} is not a CMake build tree")
        cls.tmp = tempfile.mkdtemp(prefix="distrun-install-")
        cls.prefix = os.path.join(cls.tmp, "prefix")
        sh(["cmake", "--install", BUILD, "--prefix", cls.prefix])
        cls.libdir = os.path.join(cls.prefix, "lib")
        # In a sanitizer build the library needs the sanitizer runtime first in the program, so the examples
        # are built with the same flags.
        cls.sanitize = cache_value("DISTRUN_SANITIZE") == "ON"
        cls.san_flags = ["-fsanitize=address,undefined"] if cls.sanitize else []
        # pkg-config walks gRPC's whole abseil graph for distrun.pc's Requires.private: ask it once.
        pc_env = {"PKG_CONFIG_PATH": os.path.join(cls.libdir, "pkgconfig")}
        cls.pc_version = sh(["pkg-config", "--modversion", "distrun"], env=pc_env).stdout.split()
        cls.pc_flags = sh(["pkg-config", "--cflags", "--libs", "distrun"], env=pc_env).stdout.split()
        cls.pc_static_libs = sh(["pkg-config", "--static", "--libs", "distrun"], env=pc_env).stdout.split()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, *parts):
        return os.path.join(self.prefix, *parts)

    def test_layout(self):
        for rel in ("bin/distrun", "libexec/distrun/distrun-sentinel", "libexec/distrun/distrun-runtime.so",
                    "share/man/man1/distrun.1", "share/bash-completion/completions/distrun",
                    "include/distrun/client.h", "lib/libdistrun_client.a", "lib/pkgconfig/distrun.pc",
                    "lib/cmake/distrun/distrunConfig.cmake", "lib/cmake/distrun/distrunConfigVersion.cmake"):
            with self.subTest(file=rel):
                self.assertTrue(os.path.isfile(self.path(rel)), rel)
        with open(self.path("include/distrun/client.h")) as installed, open(HEADER) as source:
            self.assertEqual(installed.read(), source.read())

    def test_python_examples_are_installed_and_compile(self):
        # JAX and Keras 3 are not packaged for Debian, so their examples cannot run here: compiling is the
        # check they get (the PyTorch one runs in torch_test).
        installed = self.path("share/doc/distrun/examples")
        for name in sorted(f for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".py")):
            with self.subTest(example=name):
                source = os.path.join(installed, name)
                self.assertTrue(os.path.isfile(source))
                sh(["/usr/bin/python3", "-c", "import py_compile, sys; py_compile.compile(sys.argv[1], "
                    "cfile=sys.argv[2], doraise=True)", source, os.path.join(self.tmp, name + "c")])
        for name in ("jax_distributed.py", "keras_env.py", "torch_allreduce.py", "cpp/kv_barrier.cc",
                     "cpp/CMakeLists.txt"):
            self.assertTrue(os.path.isfile(os.path.join(installed, name)), name)

    def test_installed_program_runs_and_says_its_version_and_features(self):
        r = sh([self.path("bin/distrun"), "--version"])
        m = re.fullmatch(r"distrun (\S+) \(features: ([a-z0-9, -]+)\)\n", r.stdout)
        self.assertIsNotNone(m, r.stdout)
        self.assertEqual(m.group(1), project_version())
        features = m.group(2).split(", ")
        self.assertEqual(features[0], "cuda-driver")
        # The NCCL helper's worker program is built exactly when the NCCL feature is.
        has_nccl_worker = os.path.exists(os.path.join(BUILD, "distrun-check-worker"))
        self.assertEqual("nccl" in features, has_nccl_worker, r.stdout)
        r = sh([self.path("bin/distrun"), "--detect", "--format", "json"], env={"CUDA_VISIBLE_DEVICES": ""})
        self.assertIn('"method"', r.stdout)

    def test_installed_program_starts_the_installed_sentinel_and_loads_the_installed_module(self):
        # The worker lists its distrun's children (the other one is the sentinel, started from libexec) and,
        # once its `distrun kv` has made its distrun start the job's runtime, the runtime module it mapped.
        script = ('for c in $(cat /proc/$PPID/task/*/children); do readlink /proc/$c/exe; done; '
                  '"$DISTRUN_PROGRAM" kv set seen yes && '
                  'grep -o "/.*/distrun-runtime.so" /proc/$PPID/maps | sort -u')
        r = sh([self.path("bin/distrun"), "--nproc-per-node", "1", "--", "/bin/sh", "-c", script],
               env={"CUDA_VISIBLE_DEVICES": ""})
        self.assertIn(os.path.realpath(self.path("libexec/distrun/distrun-sentinel")), r.stdout.split(), r.stdout)
        self.assertIn(os.path.realpath(self.path("libexec/distrun/distrun-runtime.so")), r.stdout.split(), r.stdout)

    def test_shared_library_has_a_soname_exports_the_c_api_and_carries_its_dependencies(self):
        libs = sorted(f for f in os.listdir(self.libdir) if f.startswith("libdistrun_client.so"))
        soname = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]",
                           dynamic_section(self.path("lib", "libdistrun_client.so"))).group(1)
        self.assertRegex(soname, r"^libdistrun_client\.so\.\d+$")
        self.assertIn(soname, libs)
        self.assertEqual(os.path.realpath(self.path("lib", soname)),
                         os.path.realpath(self.path("lib", "libdistrun_client.so")))

        with open(HEADER) as f:
            declared = set(re.findall(r"\b(distrun_\w+)\(", f.read()))
        exported = set(sh(["nm", "-D", "--defined-only", "--format=just-symbols",
                           self.path("lib", soname)]).stdout.split())
        exported = {s.split("@")[0] for s in exported if not s.startswith("DISTRUN_CLIENT_")}
        self.assertEqual(exported, declared, "the library exports exactly the functions of distrun/client.h")

        deps = needed(self.path("lib", soname))
        self.assertTrue(any(d.startswith("libgrpc++") for d in deps), deps)
        self.assertTrue(any(d.startswith("libprotobuf") for d in deps), deps)
        self.assertNotIn("not found", sh(["ldd", self.path("lib", soname)]).stdout)

    def run_example(self, exe, env=None):
        """--help needs nothing; without distrun's variables the library itself says what is missing."""
        r = sh([exe, "--help"], env=env)
        self.assertIn("DISTRUN_COORDINATOR_ADDRESS", r.stdout)
        r = sh([exe], env=env, check=False)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("DISTRUN_COORDINATOR_ADDRESS is not set", r.stderr)

    def cmake_example(self, name, *args):
        build = os.path.join(self.tmp, name)
        if os.path.exists(os.path.join(build, "kv_barrier")):  # built by an earlier test
            return os.path.join(build, "kv_barrier")
        env = {"CXXFLAGS": " ".join(self.san_flags), "LDFLAGS": " ".join(self.san_flags)}
        sh(["cmake", "-S", EXAMPLES, "-B", build, "-G", "Ninja", f"-DCMAKE_PREFIX_PATH={self.prefix}", *args],
           env=env)
        sh(["cmake", "--build", build], env=env)
        return os.path.join(build, "kv_barrier")

    def test_example_builds_with_find_package_against_the_shared_library(self):
        exe = self.cmake_example("cmake-shared")
        self.assertTrue(any(d.startswith("libdistrun_client.so.") for d in needed(exe)))
        self.run_example(exe)

    def test_example_runs_under_the_installed_distrun_with_three_workers(self):
        # Each worker publishes rank<i>@<host>, meets the others at a barrier, then reads all three keys.
        exe = self.cmake_example("cmake-shared")
        r = sh([self.path("bin/distrun"), "--nproc-per-node", "3", "--tag-output", "off", "--", exe], timeout=120)
        everyone = " ".join(f"rank{i}@{socket.gethostname()}" for i in range(3))
        self.assertEqual(sorted(r.stdout.splitlines()), [f"rank {i} of 3: {everyone}" for i in range(3)], r.stderr)

    def test_example_builds_with_find_package_against_the_static_library(self):
        exe = self.cmake_example("cmake-static", "-DDISTRUN_EXAMPLES_STATIC=ON")
        self.assertFalse(any("distrun" in d for d in needed(exe)), needed(exe))
        self.run_example(exe)

    def test_example_builds_with_pkg_config(self):
        self.assertEqual(self.pc_version, [project_version()])
        exe = os.path.join(self.tmp, "kv_barrier_pc")
        sh(["c++", "-std=c++17", *self.san_flags, "-o", exe, os.path.join(EXAMPLES, "kv_barrier.cc"),
            *self.pc_flags])
        self.run_example(exe, env={"LD_LIBRARY_PATH": self.libdir})

    def test_static_library_links_with_what_pkg_config_declares(self):
        # Requires.private and Libs.private must be all the static archive needs besides itself.
        libs = [x if x != "-ldistrun_client" else "-l:libdistrun_client.a" for x in self.pc_static_libs]
        self.assertIn("-l:libdistrun_client.a", libs)
        cflags = [x for x in self.pc_flags if not x.startswith(("-l", "-L"))]
        exe = os.path.join(self.tmp, "kv_barrier_pc_static")
        sh(["c++", "-std=c++17", *self.san_flags, "-o", exe, os.path.join(EXAMPLES, "kv_barrier.cc"),
            *cflags, *libs])
        self.assertFalse(any("distrun" in d for d in needed(exe)))
        self.run_example(exe)

    def python_site(self):
        """Where the module goes under a prefix other than /usr (cmake/python.cmake)."""
        version = cache_value("DISTRUN_PYTHON_VERSION")
        return self.path("lib", f"python{version}" if version else "python3", "dist-packages")

    def test_python_module_is_installed_and_loads_the_installed_library(self):
        site = self.python_site()
        self.assertTrue(os.path.isfile(os.path.join(site, "distrun", "__init__.py")), site)
        self.assertFalse(os.path.exists(os.path.join(site, "distrun", "__pycache__")))
        # Neither DISTRUN_CLIENT_LIBRARY nor the loader's path: the module names the library installed with it.
        r = sh([*python_command(), "-c", "import distrun; print(distrun.__file__); print(distrun.library_path())"],
               env={"PYTHONPATH": site, "PYTHONDONTWRITEBYTECODE": "1"}, cwd=self.tmp)
        module, library = r.stdout.split()
        self.assertEqual(module, os.path.join(site, "distrun", "__init__.py"))
        self.assertEqual(library, self.path("lib", "libdistrun_client.so.0"))

    def test_python_module_runs_under_the_installed_distrun_with_two_workers(self):
        script = os.path.join(self.tmp, "kv_worker.py")
        with open(script, "w") as f:
            f.write("import distrun\n"
                    "r = distrun.rank()\n"
                    "distrun.set(f'worker/{r}', f'rank{r}')\n"
                    "distrun.barrier('both', timeout=60)\n"
                    "print(r, distrun.get(f'worker/{1 - r}', text=True), distrun.library_path())\n")
        r = sh([self.path("bin/distrun"), "--nproc-per-node", "2", "--tag-output", "off", "--", *python_command(),
                script], env={"PYTHONPATH": self.python_site(), "PYTHONDONTWRITEBYTECODE": "1"}, cwd=self.tmp)
        library = self.path("lib", "libdistrun_client.so.0")
        self.assertEqual(sorted(r.stdout.splitlines()), [f"0 rank1 {library}", f"1 rank0 {library}"], r.stderr)

    def test_header_is_c(self):
        # The API is for every language; a C compiler takes the header and links the library.
        src = os.path.join(self.tmp, "open.c")
        with open(src, "w") as f:
            f.write('#include <distrun/client.h>\n#include <stdio.h>\n'
                    'int main(void) {\n  char error[256] = "";\n'
                    '  distrun_client* c = distrun_client_open_env(0, error, sizeof error);\n'
                    '  if (c == NULL) { puts(error); return 3; }\n  distrun_client_close(c);\n  return 0;\n}\n')
        exe = os.path.join(self.tmp, "open_c")
        sh(["cc", "-std=c11", "-Wall", "-Werror", "-pedantic", *self.san_flags, "-o", exe, src, *self.pc_flags])
        r = sh([exe], env={"LD_LIBRARY_PATH": self.libdir}, check=False)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertIn("DISTRUN_COORDINATOR_ADDRESS", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
