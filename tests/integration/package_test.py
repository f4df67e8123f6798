"""CPack's Debian packages: distrun (program, man page, completion, shared client library, Python module) depends on
exactly the Debian packages that hold the libraries its ELF files load; distrun-dev holds what programs
build against. The packages are unpacked into a scratch root and used from there."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.dirname(DISTRUN)
BASE_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": os.environ.get("HOME", "/root")}


def sh(args, env=None, check=True, timeout=180):
    full_env = dict(BASE_ENV)
    full_env.update(env or {})
    r = subprocess.run(args, env=full_env, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(distrun VERSION ([0-9.]+)", f.read()).group(1)


def field(deb, name):
    return sh(["dpkg-deb", "-f", deb, name]).stdout.strip()


def depends(deb):
    """{package: constraint} from Depends."""
    out = {}
    for item in field(deb, "Depends").split(","):
        m = re.fullmatch(r"\s*([a-z0-9.+-]+)(?:\s*\((.*)\))?\s*", item)
        assert m, f"unreadable Depends item {item!r}"
        out[m.group(1)] = m.group(2)
    return out


def contents(deb):
    """Paths in the package, without the leading '.'."""
    paths = []
    for line in sh(["dpkg-deb", "-c", deb]).stdout.splitlines():
        path = line.split(None, 5)[5].split(" -> ")[0]
        paths.append(path[1:] if path.startswith("./") else path)
    return paths


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def provided_names(packages):
    """{package: its name and the virtual packages it provides} (libspdlog1.10 provides
    libspdlog1.10-fmt9, the name its shlibs file asks dependents to use)."""
    out = {}
    r = sh(["dpkg-query", "-W", "-f=${Package} ${Provides}\n", *packages])
    for line in r.stdout.splitlines():
        name, _, provides = line.partition(" ")
        out[name] = {name} | {item.split()[0] for item in provides.split(",") if item.strip()}
    return out


def owning_packages(paths):
    """{library path: the Debian package that installed it}; libraries no package owns are left out. One
    dpkg-query for all, under the names merged /usr gives each file."""
    variants = {}
    for path in paths:
        real = os.path.realpath(path)
        for v in {path, real, real.replace("/usr/lib/", "/lib/", 1), path.replace("/lib/", "/usr/lib/", 1)}:
            variants[v] = path
    r = sh(["dpkg-query", "-S", *sorted(variants)], check=False)  # exits 1 when some path is unowned
    owners = {}
    for line in r.stdout.splitlines():
        package, _, path = line.partition(": ")
        if path in variants:
            owners[variants[path]] = package.split(":")[0]
    return owners


def direct_libraries(elf):
    """{soname: resolved path} for the NEEDED entries of one ELF file (dpkg-shlibdeps looks at no others)."""
    dynamic = sh(["readelf", "-d", elf]).stdout
    names = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic)
    ldd = sh(["ldd", elf]).stdout
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", ldd, re.M))
    for loader in re.findall(r"^\s*(/\S+) \(0x", ldd, re.M):  # the dynamic loader has no "=>"
        resolved[os.path.basename(loader)] = loader
    return {n: resolved.get(n) for n in names}


class DebianPackages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        config = os.path.join(BUILD, "CPackConfig.cmake")
        if not os.path.exists(config):
            raise unittest.SkipTest(f"{BUILD} has no CPackConfig.cmake")
        cls.tmp = tempfile.mkdtemp(prefix="distrun-package-")
        sh(["cpack", "--config", config, "-G", "DEB", "-B", cls.tmp])
        version = project_version()
        arch = sh(["dpkg", "--print-architecture"]).stdout.strip()
        cls.main = os.path.join(cls.tmp, f"distrun_{version}_{arch}.deb")
        cls.dev = os.path.join(cls.tmp, f"distrun-dev_{version}_{arch}.deb")
        cls.root = os.path.join(cls.tmp, "root")
        for deb in (cls.main, cls.dev):
            sh(["dpkg-deb", "-x", deb, cls.root])

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_control_fields(self):
        for deb, name in ((self.main, "distrun"), (self.dev, "distrun-dev")):
            with self.subTest(package=name):
                self.assertEqual(field(deb, "Package"), name)
                self.assertEqual(field(deb, "Version"), project_version())
                self.assertEqual(field(deb, "Architecture"), sh(["dpkg", "--print-architecture"]).stdout.strip())
                self.assertTrue(field(deb, "Maintainer"))
                self.assertTrue(field(deb, "Description").strip())

    def test_main_package_contents(self):
        paths = contents(self.main)
        for expected in ("/usr/bin/distrun", "/usr/libexec/distrun/distrun-sentinel",
                         "/usr/libexec/distrun/distrun-runtime.so", "/usr/share/man/man1/distrun.1",
                         "/usr/share/bash-completion/completions/distrun"):
            self.assertIn(expected, paths)
        libs = [p for p in paths if re.fullmatch(r"/usr/lib/libdistrun_client\.so\.\d+(\.\d+)*", p)]
        self.assertEqual(len(libs), 2, paths)  # the soname link and the library
        self.assertFalse([p for p in paths if p.startswith("/usr/include") or p.endswith((".a", ".pc"))])
        # The library's shlibs entry lets packages built against it depend on this one.
        shlibs = sh(["dpkg-deb", "--info", self.main, "shlibs"]).stdout
        self.assertRegex(shlibs, r"^libdistrun_client \d+ distrun \(>= " + re.escape(project_version()) + r"\)")

    def test_main_package_has_the_python_module_naming_the_packaged_library(self):
        paths = contents(self.main)
        site = "/usr/lib/python3/dist-packages"
        self.assertIn(site + "/distrun/__init__.py", paths)
        self.assertFalse([p for p in paths if "__pycache__" in p or p.endswith(".pyc")], paths)
        # The library it names is the package's, at its place once installed.
        r = sh(["/usr/bin/python3", "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                "from distrun import _install; print(_install.LIBRARY)", os.path.join(self.root, site.lstrip("/"))])
        library = r.stdout.strip()
        self.assertRegex(library, r"^/usr/lib/libdistrun_client\.so\.\d+$")
        self.assertIn(library, paths)

    def test_main_package_depends_on_the_packages_of_the_libraries_it_loads(self):
        deps = depends(self.main)
        for name in deps:
            self.assertFalse(name.endswith("-dev"), name)
        elves = [os.path.join(self.root, p.lstrip("/")) for p in contents(self.main)]
        elves = [p for p in elves if os.path.isfile(p) and not os.path.islink(p) and is_elf(p)]
        self.assertIn(os.path.join(self.root, "usr/bin/distrun"), elves)
        libraries = {}
        for elf in elves:
            libraries.update(direct_libraries(elf))
        self.assertEqual([n for n, p in libraries.items() if p is None], [], "unresolved libraries")
        # Libraries outside Debian (a CUDA toolkit's) are nobody's package and cannot be depended on.
        owners = set(owning_packages(libraries.values()).values())
        self.assertIn("libgrpc++1.51", owners)
        names = provided_names(owners)
        missing = {o for o in owners if not names[o] & set(deps)}
        self.assertEqual(missing, set(), "packages of loaded libraries that Depends does not name")
        # And nothing else: every dependency is a package (or a name one provides) of a loaded library.
        self.assertEqual(set(deps) - set().union(*names.values()), set(), "Depends names packages no ELF file needs")

    def test_dev_package(self):
        paths = contents(self.dev)
        for expected in ("/usr/include/distrun/client.h", "/usr/lib/libdistrun_client.a", "/usr/lib/libdistrun_client.so",
                         "/usr/lib/pkgconfig/distrun.pc", "/usr/lib/cmake/distrun/distrunConfig.cmake"):
            self.assertIn(expected, paths)
        deps = depends(self.dev)
        self.assertEqual(deps.get("distrun"), "= " + project_version())
        # distrun.pc's Requires.private and the static library need them.
        self.assertIn("libgrpc++-dev", deps)
        self.assertIn("libprotobuf-dev", deps)

    def test_unpacked_program_and_library_work(self):
        r = sh([os.path.join(self.root, "usr/bin/distrun"), "--version"])
        self.assertTrue(r.stdout.startswith(f"distrun {project_version()} (features: cuda-driver"), r.stdout)
        link = os.path.join(self.root, "usr/lib/libdistrun_client.so")
        self.assertTrue(os.path.isfile(os.path.realpath(link)), "the .so link resolves inside the package")
        # distrun.pc finds its prefix from where it lies.
        r = sh(["pkg-config", "--variable=includedir", "distrun"],
               env={"PKG_CONFIG_PATH": os.path.join(self.root, "usr/lib/pkgconfig")})
        self.assertEqual(os.path.realpath(r.stdout.strip()), os.path.join(self.root, "usr/include"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
