"""The wheel where PyTorch's wheels install but Debian 12's programs do not: a Debian 11 userland (glibc 2.31,
Python 3.9, pip 20.3) that scripts/bullseye.sh made with debootstrap. The wheel is installed offline into a
venv of that root's own Python, and every command runs inside the root (chroot, in a mount namespace of its
own with /proc, /sys and /dev, gone with the command): `--detect`; a job whose workers use `import distrun`;
a two-node job (two distruns, node 0 and an agent) whose workers share the key-value store; a failing worker's
exit code; SIGTERM reaching every worker. After each, no process of the job may remain."""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from launch_helpers import describe, processes_with, wait_for  # noqa: E402
from multi_node import free_port  # noqa: E402
from wheel_test import TRAIN, pack_wheel, sanitized_build  # noqa: E402

ROOT = os.environ.get("DISTRUN_BULLSEYE_ROOT", "/var/cache/distrun/bullseye-root")
# A private mount namespace: the root's /proc, /sys and /dev exist for this command alone and are gone when
# its last process is. exec keeps the pid: a signal to the Popen reaches the command itself.
ENTER = ('r=$1; shift; mount -t proc proc "$r/proc" && mount -t sysfs sysfs "$r/sys" && '
         'mount --rbind /dev "$r/dev" && exec chroot "$r" "$@"')


class OlderUserland(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if sanitized_build():
            raise unittest.SkipTest("the wheel is packed from a release build")
        if not os.path.isfile(os.path.join(ROOT, ".complete")):
            raise AssertionError(f"no Debian 11 root in {ROOT}: run scripts/install-deps.sh (scripts/bullseye.sh root)")
        # A directory of this run's inside the root: the wheel, the venv, the workers' scripts and files.
        cls.inside = f"/tmp/distrun-older-{uuid.uuid4().hex[:12]}"
        cls.host_dir = ROOT + cls.inside
        os.makedirs(cls.host_dir)
        cls.tmp = tempfile.TemporaryDirectory(prefix="distrun-older-")
        wheel = os.environ.get("DISTRUN_WHEEL") or pack_wheel(cls.tmp.name)
        shutil.copy(wheel, cls.host_dir)
        cls.venv = cls.inside + "/venv"
        r = cls.run_inside(["/usr/bin/python3", "-m", "venv", cls.venv])
        assert r.returncode == 0, r.stdout + r.stderr
        r = cls.run_inside([cls.venv + "/bin/pip", "install", "--no-index",
                            cls.inside + "/" + os.path.basename(wheel)])
        assert r.returncode == 0, "pip 20.3 of Debian 11 refused the wheel:\n" + r.stdout + r.stderr
        cls.pip_said = r.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(getattr(cls, "host_dir", "/nonexistent"), ignore_errors=True)
        if hasattr(cls, "tmp"):
            cls.tmp.cleanup()

    @classmethod
    def env(cls, **extra):
        env = {"PATH": cls.venv + "/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": cls.inside,
               "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1", "LANG": "C.UTF-8"}
        env.update(extra)
        return env

    @classmethod
    def popen_inside(cls, argv, env=None, **kwargs):
        kwargs.setdefault("stdin", subprocess.DEVNULL)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", ENTER, "sh", ROOT,
                                 *argv], env=env or cls.env(), text=True, **kwargs)

    @classmethod
    def run_inside(cls, argv, env=None, timeout=120):
        p = cls.popen_inside(argv, env)
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"{argv} ran over {timeout}s:\n{out}{err}")
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def setUp(self):
        self.marker = f"DISTRUN_TEST_MARKER={uuid.uuid4().hex}"
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
        wait_for(lambda: not processes_with(self.marker), timeout=5)
        left = processes_with(self.marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)  # carries this test's marker: a process this test started
        self.assertEqual(left, [], "processes of the job outlived distrun:\n" + "\n".join(map(describe, left)))

    def job_env(self, **extra):
        name, value = self.marker.split("=", 1)
        return self.env(**{name: value}, **extra)

    def distrun(self, *args, env=None):
        p = self.popen_inside([self.venv + "/bin/distrun", *args], env=env or self.job_env())
        self.procs.append(p)
        return p

    def script(self, name, text):
        with open(os.path.join(self.host_dir, name), "w") as f:
            f.write(textwrap.dedent(text))
        return self.inside + "/" + name

    def finish(self, p, timeout=90):
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def test_glibc_and_python_are_debian_11s(self):
        r = self.run_inside(["/usr/bin/python3", "-c", "import os, sys; "
                             "print(os.confstr('CS_GNU_LIBC_VERSION'), sys.version_info[:2])"])
        self.assertEqual(r.stdout.strip(), "glibc 2.31 (3, 9)", r.stderr)
        self.assertIn("Successfully installed distrun", self.pip_said)

    def test_detect(self):
        code, out, err = self.finish(self.distrun("--detect"))
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"method\s+local")
        self.assertIn("DISTRUN_PROCESS_ID=0", out)

    def test_a_job_whose_workers_import_distrun(self):
        train = self.script("train.py", TRAIN)
        code, out, err = self.finish(self.distrun("--nproc-per-node", "2", "--tag-output", "off", "--", "python",
                                                  train))
        self.assertEqual(code, 0, out + err)
        site = self.venv + "/lib/python3.9/site-packages"
        lines = sorted(out.splitlines())
        self.assertEqual(len(lines), 2, out + err)
        for rank, line in enumerate(lines):
            self.assertEqual(line, f"rank {rank}/2 local {rank} values value 0,value 1 progress True "
                                   f"lib {site}/distrun/libdistrun_client.so.0 python {self.venv}/bin/python "
                                   f"sentinel {self.venv}/bin/distrun-sentinel")

    def test_two_nodes_share_the_key_value_store(self):
        worker = self.script("pair.py", """
            import distrun
            node = distrun.rank()
            distrun.set("from/%d" % node, "node %d on glibc 2.31" % node)
            distrun.barrier("both-set")
            print("rank %d of %d got: %s" % (node, distrun.world_size(),
                                             distrun.get("from/%d" % (1 - node), timeout=30, text=True)))
            """)
        port = free_port()
        nodes = [self.distrun("--num-nodes", "2", "--node-rank", str(rank), "--coordinator-address",
                              f"127.0.0.1:{port}", "--nproc-per-node", "1", "--tag-output", "off", "--",
                              "python", worker) for rank in (0, 1)]
        for rank, p in enumerate(nodes):
            code, out, err = self.finish(p)
            self.assertEqual(code, 0, f"node {rank}: {out}{err}")
            self.assertEqual(out.strip(), f"rank {rank} of 2 got: node {1 - rank} on glibc 2.31", err)

    def test_a_failing_worker_gives_its_exit_code_and_stops_the_others(self):
        worker = self.script("fail.py", """
            import sys, time, distrun
            if distrun.rank() == 1:
                sys.exit(7)
            time.sleep(300)
            """)
        code, out, err = self.finish(self.distrun("--nproc-per-node", "3", "--grace-period", "5", "--", "python",
                                                  worker))
        self.assertEqual(code, 7, out + err)
        self.assertIn("rank 1 failed first", err)

    def test_sigterm_reaches_every_worker(self):
        worker = self.script("term.py", f"""
            import os, signal, sys, time
            rank = os.environ["RANK"]
            def on_term(sig, frame):
                open("{self.inside}/term-" + rank, "w").close()
                sys.exit(0)
            signal.signal(signal.SIGTERM, on_term)
            open("{self.inside}/ready-" + rank, "w").close()
            time.sleep(300)
            """)
        for name in os.listdir(self.host_dir):
            if name.startswith(("ready-", "term-")):
                os.remove(os.path.join(self.host_dir, name))
        p = self.distrun("--nproc-per-node", "3", "--grace-period", "10", "--", "python", worker)
        ready = [os.path.join(self.host_dir, f"ready-{r}") for r in range(3)]
        self.assertTrue(wait_for(lambda: all(map(os.path.exists, ready)), timeout=60), "workers did not start")
        p.send_signal(signal.SIGTERM)  # distrun itself: the chroot and sh exec'd it
        code, out, err = self.finish(p)
        self.assertEqual(code, 128 + signal.SIGTERM, out + err)
        for r in range(3):
            self.assertTrue(os.path.exists(os.path.join(self.host_dir, f"term-{r}")), f"rank {r}: {err}")
        self.assertIn("received SIGTERM", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
