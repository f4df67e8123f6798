"""The Python module `distrun` (python/distrun, ctypes over the build's libdistrun_client.so.0) in real
workers under a real distrun: the key-value store and barriers across workers, the errors, this worker's
identity, and how the module finds the library."""
import json
import os
import subprocess
import sys
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distrun_harness import run  # noqa: E402
from launch_helpers import BASE_PATH, LaunchCase  # noqa: E402
from python_workers import LIBRARY, module_env, python_command  # noqa: E402

# Imported by every worker script: the module, and a check that says what differed.
PRELUDE = """\
import json, os, sys, threading, time
import distrun
R = distrun.rank()

def expect(actual, expected, what=""):
    if actual != expected:
        raise AssertionError(f"rank {R}: {what} {actual!r} != {expected!r}")

def raises(cls, f, *args, **kwargs):
    try:
        f(*args, **kwargs)
    except cls as e:
        return e
    raise AssertionError(f"rank {R}: {f.__name__}{args} did not raise {cls.__name__}")
"""


class PythonModule(LaunchCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.isfile(LIBRARY):
            raise unittest.SkipTest(f"no client library at {LIBRARY}")
        cls.python = python_command()

    def script(self, body):
        path = self.path("worker.py")
        with open(path, "w") as f:
            f.write(PRELUDE + textwrap.dedent(body) + '\nprint(f"ok {R}")\n')
        return path

    def launch(self, nproc, body, *extra, env=None, timeout=60):
        """Runs `body` (after PRELUDE) in `nproc` workers; each must get to its end."""
        r = run(["--nproc-per-node", str(nproc), "--tag-output", "off", *extra, "--", *self.python,
                 self.script(body)], env=self.env(**module_env(**(env or {}))), timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(sorted(line for line in r.stdout.splitlines() if line.startswith("ok ")),
                         [f"ok {i}" for i in range(nproc)], r.stdout + r.stderr)
        return r

    def python_alone(self, code, env):
        """Runs `code` in the interpreter outside any job: exactly `env` plus PATH."""
        full_env = {"PATH": BASE_PATH, self.marker_name: self.marker_value, **env}
        return subprocess.run([*self.python, "-c", textwrap.dedent(code)], env=full_env, cwd=self.dir,
                              capture_output=True, text=True, timeout=60)

    # -- the store and barriers across workers --

    def test_set_barrier_get_across_workers(self):
        r = self.launch(3, """
            distrun.set(f"key/{R}", f"value {R}")
            distrun.barrier("all-set", timeout=30)
            other = (R + 1) % 3
            expect(distrun.get(f"key/{other}"), f"value {other}".encode(), "get")
            print(f"{R} sees {distrun.get(f'key/{other}', text=True)}")
        """)
        self.assertEqual(sorted(line for line in r.stdout.splitlines() if " sees " in line),
                         ["0 sees value 1", "1 sees value 2", "2 sees value 0"])

    def test_get_waits_until_another_worker_sets_the_key(self):
        self.launch(2, """
            if R == 0:
                expect(distrun.try_get("late"), None, "before worker 1 sets it")
                distrun.set("waiting", "1")
                expect(distrun.get("late", timeout=30, text=True), "here", "get")
            else:
                distrun.get("waiting", timeout=30)
                time.sleep(0.5)
                distrun.set("late", "here")
        """)

    def test_concurrent_adds_from_threads_of_every_worker_sum_correctly(self):
        # 3 workers x 4 threads x 25 adds through each worker's one (shared) client.
        r = self.launch(3, """
            got = []
            def adder():
                for _ in range(25):
                    got.append(distrun.add("counter"))
            threads = [threading.Thread(target=adder) for _ in range(4)]
            for t in threads: t.start()
            for t in threads: t.join()
            distrun.set(f"seen/{R}", json.dumps(got))
            distrun.barrier("counted", timeout=60)
            if R == 0:
                seen = sorted(v for s in distrun.list("seen/").values() for v in json.loads(s))
                print("total", distrun.get("counter", text=True), "distinct", len(set(seen)), seen[0], seen[-1])
        """, timeout=120)
        self.assertIn("total 300 distinct 300 1 300", r.stdout)

    def test_add_compare_and_set_and_delete(self):
        self.launch(1, """
            expect(distrun.add("n", 5), 5, "add to absent")
            expect(distrun.add("n", -7), -2, "negative delta")
            expect(distrun.add("n"), -1, "default delta")
            expect(distrun.compare_and_set("k", None, "first"), True, "cas on absent")
            expect(distrun.compare_and_set("k", None, "again"), False, "cas None on present")
            expect(distrun.compare_and_set("k", "wrong", "x"), False, "cas mismatch")
            expect(distrun.get("k"), b"first", "after failed cas")
            expect(distrun.compare_and_set("k", b"first", b"second"), True, "cas match")
            expect(distrun.try_get("k", text=True), "second", "after cas")
            e = raises(distrun.FailedPreconditionError, distrun.add, "k")
            expect(e.status, distrun.Status.FAILED_PRECONDITION, "status")
            assert "decimal integer" in str(e), e
            expect(distrun.delete("k"), True, "delete present")
            expect(distrun.delete("k"), False, "delete absent")
            expect(distrun.try_get("k"), None, "try_get deleted")
            raises(TypeError, distrun.set, "k", 5)
            raises(ValueError, distrun.set, "nul\\0key", "v")
            e = raises(distrun.InvalidArgumentError, distrun.set, "", "v")
            assert isinstance(e, ValueError) and "empty key" in str(e), e
        """)

    def test_list_by_prefix_is_sorted(self):
        self.launch(1, """
            for k, v in [("b/1", "z"), ("a/2", "y"), ("a/1", "x"), ("ab", "w")]:
                distrun.set(k, v)
            expect(distrun.list("a/"), {"a/1": b"x", "a/2": b"y"}, "list a/")
            everything = distrun.list(text=True)
            expect(list(everything.items()), [("a/1", "x"), ("a/2", "y"), ("ab", "w"), ("b/1", "z")], "list all")
            expect(distrun.list("none/"), {}, "empty list")
        """)

    def test_bytes_with_nul_and_non_utf8_round_trip(self):
        self.launch(2, """
            blob = bytes(range(256)) + b"\\0\\xff\\xfe"
            if R == 0:
                distrun.set("blob", blob)
                distrun.set("empty", b"")
                distrun.set("text", "Grüße ✓")
                distrun.set("view", memoryview(bytearray(b"a\\0b")))
            distrun.barrier("set", timeout=30)
            expect(distrun.get("blob"), blob, "get")
            expect(distrun.try_get("blob"), blob, "try_get")
            expect(distrun.list("blob")["blob"], blob, "list")
            expect(distrun.get("empty"), b"", "empty value")
            expect(distrun.get("text", text=True), "Grüße ✓", "text")
            expect(distrun.get("view"), b"a\\0b", "memoryview")
            raises(UnicodeDecodeError, distrun.get, "blob", text=True)
            distrun.barrier("read", timeout=30)
            if R == 0:
                expect(distrun.compare_and_set("blob", blob, b"\\0"), True, "cas with a binary expected value")
                expect(distrun.get("blob"), b"\\0", "after cas")
        """)

    # -- errors --

    def test_get_timeout_raises_timeout_error_with_the_clients_message(self):
        self.launch(1, """
            e = raises(TimeoutError, distrun.get, "never", timeout=0.3)
            assert isinstance(e, distrun.DeadlineExceededError) and isinstance(e, distrun.DistrunError), type(e)
            expect(e.status, distrun.Status.DEADLINE_EXCEEDED, "status")
            expect(e.status.name, "DEADLINE_EXCEEDED", "status name")
            expect(e.code, 6, "code")
            expect(str(e), "key 'never' was not set before the timeout", "message")
            e = raises(distrun.InvalidArgumentError, distrun.get, "never", timeout=0)
            assert "positive timeout" in str(e), e
        """)

    def test_barrier_timeout_names_who_is_missing(self):
        self.launch(2, """
            if R == 0:
                e = raises(distrun.DeadlineExceededError, distrun.barrier, "lonely", timeout=0.3)
                assert isinstance(e, TimeoutError)
                assert "barrier 'lonely' timed out: 1 of 2 arrived" in str(e) and "missing" in str(e), e
                distrun.set("reported", "1")
            else:
                distrun.get("reported", timeout=30)  # stays in the job, away from the barrier
        """)

    def test_barrier_over_some_workers(self):
        self.launch(3, """
            if R < 2:
                distrun.barrier("pair", count=2, timeout=30)
        """)

    def test_wrong_token_is_refused_without_showing_it(self):
        r = self.launch(1, """
            address, process_id = os.environ["DISTRUN_COORDINATOR_ADDRESS"], R
            with distrun.Client(address, "guessed-s3cret", process_id) as c:
                e = raises(distrun.UnauthenticatedError, c.get, "x", timeout=5)
            assert isinstance(e, distrun.DistrunError) and isinstance(e, PermissionError), type(e)
            expect(e.status, distrun.Status.UNAUTHENTICATED, "status")
            assert "wrong job token" in str(e) and "guessed-s3cret" not in str(e), e
            os.environ["DISTRUN_TOKEN"] = "guessed-s3cret"  # read by the default client, opened now
            e = raises(distrun.UnauthenticatedError, distrun.set, "x", "y")
            assert "guessed-s3cret" not in str(e) and "guessed-s3cret" not in repr(e), e
        """)
        self.assertIn("wrong job token", r.stderr)  # the service logs the refusal...
        self.assertNotIn("guessed-s3cret", r.stdout + r.stderr)  # ...never the token

    def test_client_class_with_explicit_address_from_threads(self):
        self.launch(2, """
            env = os.environ
            c = distrun.Client(env["DISTRUN_COORDINATOR_ADDRESS"], env["DISTRUN_TOKEN"], R, call_timeout=10)
            assert "DISTRUN_TOKEN" not in repr(c) and env["DISTRUN_TOKEN"] not in repr(c), repr(c)
            threads = [threading.Thread(target=c.set, args=(f"t/{R}/{i}", str(i))) for i in range(8)]
            for t in threads: t.start()
            for t in threads: t.join()
            c.barrier("threads-done", timeout=30)
            expect(len(c.list("t/")), 16, "keys from both workers' threads")
            c.close()
            c.close()
            raises(ValueError, c.try_get, "t/0/0")
            raises(TypeError, distrun.Client, token="t")
            with distrun.Client() as d:  # from the environment, as the default client
                expect(d.try_get(f"t/{1 - R}/7", text=True), "7", "default-style client")
        """)

    def test_identity_is_what_distrun_set(self):
        r = self.launch(3, """
            names = {"rank": "DISTRUN_PROCESS_ID", "world_size": "DISTRUN_NUM_PROCESSES",
                     "local_rank": "DISTRUN_LOCAL_RANK", "local_world_size": "DISTRUN_LOCAL_WORLD_SIZE",
                     "node_rank": "DISTRUN_NODE_RANK", "num_nodes": "DISTRUN_NUM_NODES",
                     "restart_count": "DISTRUN_RESTART_COUNT", "run_id": "DISTRUN_RUN_ID"}
            print("identity", json.dumps({f: [getattr(distrun, f)(), os.environ[v]] for f, v in names.items()}))
            expect(os.environ["DISTRUN_EPOCH"], "0", "DISTRUN_EPOCH")
            expect(distrun.epoch(), 0, "epoch")
            os.environ["DISTRUN_EPOCH"] = "4"
            expect(distrun.epoch(), 4, "epoch")
            del os.environ["DISTRUN_EPOCH"]
            expect(distrun.epoch(), 0, "epoch without DISTRUN_EPOCH")
        """)
        rows = [json.loads(line.split(" ", 1)[1]) for line in r.stdout.splitlines() if line.startswith("identity ")]
        self.assertEqual(len(rows), 3, r.stdout)
        for row in rows:
            for name, (value, env) in row.items():
                self.assertEqual(str(value), env, name)
            self.assertIsInstance(row["rank"][0], int)
        self.assertEqual(sorted(row["rank"][0] for row in rows), [0, 1, 2])
        self.assertEqual({row["local_rank"][0] for row in rows}, {0, 1, 2})
        for name, value in [("world_size", 3), ("local_world_size", 3), ("node_rank", 0), ("num_nodes", 1),
                            ("restart_count", 0)]:
            self.assertEqual({row[name][0] for row in rows}, {value}, name)
        run_ids = {row["run_id"][0] for row in rows}
        self.assertEqual(len(run_ids), 1)
        self.assertTrue(run_ids.pop())

    def test_restarted_workers_see_the_restart_count(self):
        r = self.launch(1, """
            n = distrun.restart_count()
            print("restart", n)
            if n == 0:
                sys.exit(3)
        """, "--max-restarts", "1")
        self.assertIn("restart 1", r.stdout.splitlines())

    # -- outside a job, and finding the library --

    def test_outside_distrun_the_error_names_the_variables(self):
        r = self.python_alone("""
            import distrun
            for f in (lambda: distrun.set("k", "v"), distrun.rank, distrun.Client):
                try:
                    f()
                except distrun.NotInJobError as e:
                    assert isinstance(e, distrun.DistrunError) and e.status is None, e
                    print(e)
            print("epoch", distrun.epoch())
        """, module_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        self.assertEqual(len(lines), 4, r.stdout)
        self.assertIn("DISTRUN_COORDINATOR_ADDRESS is not set", lines[0])
        for name in ("DISTRUN_COORDINATOR_ADDRESS", "DISTRUN_TOKEN", "DISTRUN_PROCESS_ID", "distrun.Client("):
            self.assertIn(name, lines[0])
        self.assertEqual(lines[0], lines[2])
        self.assertIn("DISTRUN_PROCESS_ID is not set", lines[1])
        self.assertEqual(lines[3], "epoch 0")

    def test_library_named_by_the_variable_that_does_not_exist(self):
        missing = os.path.join(self.dir, "nowhere", "libdistrun_client.so.0")
        r = self.python_alone("""
            import distrun  # the library is loaded at first use, not at import
            try:
                distrun.set("k", "v")
            except ImportError as e:
                assert isinstance(e, distrun.LibraryNotFoundError) and isinstance(e, distrun.DistrunError)
                print(e)
        """, module_env(DISTRUN_CLIENT_LIBRARY=missing, DISTRUN_COORDINATOR_ADDRESS="127.0.0.1:1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"{missing} (DISTRUN_CLIENT_LIBRARY)", r.stdout)
        self.assertIn("cannot open shared object file", r.stdout)
        self.assertIn("set DISTRUN_CLIENT_LIBRARY to the library's path", r.stdout)
        # Named explicitly, it is the only one tried, although the loader would find one.
        self.assertNotIn("dynamic loader", r.stdout)

    def test_without_the_variable_the_dynamic_loader_finds_it(self):
        code = "import distrun; print(distrun.library_path())"
        r = self.python_alone(code, module_env(DISTRUN_CLIENT_LIBRARY=None, LD_LIBRARY_PATH=os.path.dirname(LIBRARY)))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.path.realpath(r.stdout.strip()), os.path.realpath(LIBRARY))
        r = self.python_alone(code, module_env(DISTRUN_CLIENT_LIBRARY=None))
        if r.returncode == 0:
            self.skipTest(f"this machine's loader finds a library of its own: {r.stdout.strip()}")
        self.assertIn("libdistrun_client.so.0 (the dynamic loader's search path)", r.stderr)
        self.assertIn("DISTRUN_CLIENT_LIBRARY", r.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
