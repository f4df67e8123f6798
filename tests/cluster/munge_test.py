"""Agents that prove their user with munge, across the lab's hosts: a job without DISTRUN_TOKEN whose nodes
show node 0 a munge credential (the lab's munged, $LAB/munge/munge.socket) and get the workers' token from
it; an agent of another user (uid 4242) refused while the job goes on, and `distrun status` from another host
with only the job's address (its munge credential for the token; uid 4242's refused); a captured hello
replayed to node 0 refused; and munged not answering (`--munge require` stops, auto falls back to the old
warning).

Every job here runs without a job token (DISTRUN_TOKEN=None) and names the lab's munged socket, which is not
libmunge's default. The lab's munged is never stopped: Slurm itself needs it."""
import os
import random
import re
import shutil
import subprocess
import unittest
import uuid

from cluster_harness import (DISTRUN, LAB, NODES, PYTHON, REPO, SLURM_CONF, JobRuntimeCase, main, on_login_host,
                             on_node, wait_for)

TORCH_ALLREDUCE = os.path.join(REPO, "examples", "torch_allreduce.py")
MUNGE_SOCKET = os.path.join(LAB, "munge", "munge.socket")
MISSING_SOCKET = os.path.join(LAB, "munge", "no-such.socket")
STRANGER_UID = 4242
AS_STRANGER = ["setpriv", "--reuid", str(STRANGER_UID), "--regid", str(STRANGER_UID), "--clear-groups"]
PROTECTION = "protection: munge: node 0 admits agents of its own user only and hands the workers its token"
NO_TOKEN = "no job token (DISTRUN_TOKEN or --token-file)"
PREFACE = b"DRUN/1\r\n"  # the agent channel's preface (runtime/transport/agent_frames.h)
BOUND = 60

# Runs on a lab host between an agent and node 0: forwards every connection both ways and records what the
# first one that reached node 0 sent (the agent's preface, hello and what follows) to RECORD.
PROXY = r"""
import socket, sys, threading
port, target, target_port, record = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("0.0.0.0", port))
listener.listen(16)
open(record + ".ready", "w").close()

def pump(src, dst, log):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if log:
                log.write(data)
                log.flush()
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            try:
                s.shutdown(how)
            except OSError:
                pass

recorded = False
while True:
    client, _ = listener.accept()
    try:
        upstream = socket.create_connection((target, target_port), timeout=5)
        upstream.settimeout(None)
    except OSError:
        client.close()  # node 0 not listening yet: the agent tries again
        continue
    log = None
    if not recorded:
        log, recorded = open(record, "wb"), True
    threading.Thread(target=pump, args=(client, upstream, log), daemon=True).start()
    threading.Thread(target=pump, args=(upstream, client, None), daemon=True).start()
"""

# Sends bytes (hex) to HOST:PORT and prints what came back until the peer closed: "closed HEX", or
# "open HEX" when it still held the connection after 15 s.
REPLAY = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=15)
s.sendall(bytes.fromhex(sys.argv[3]))
got = b""
try:
    while True:
        data = s.recv(65536)
        if not data:
            print("closed", got.hex())
            break
        got += data
except ConnectionResetError:
    print("closed", got.hex())
except socket.timeout:
    print("open", got.hex())
"""


def free_port():
    """A port for node 0's coordinator; each lab host has its own network, and Slurm jobs' ports are higher."""
    return str(29600 + random.randrange(300))


class Munge(JobRuntimeCase):
    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        if len(NODES) < 3:
            raise unittest.SkipTest(f"needs 3 lab hosts (an agent between two others, an arrival); the lab has "
                                    f"{len(NODES)}")
        help_text = subprocess.run([DISTRUN, "--help"], capture_output=True, text=True).stdout
        if "--munge-socket" not in help_text:
            raise unittest.SkipTest("distrun --help does not list --munge-socket: agents do not use munge yet")

    def munge_env(self, **extra):
        """A job's environment without a job token, naming the lab's munged."""
        return self.env(**{"DISTRUN_TOKEN": None, "DISTRUN_MUNGE_SOCKET": MUNGE_SOCKET, **extra})

    def errors(self, tasks):
        return {t: self.read(f"{t}.err") for t in range(tasks)}

    # -- processes started on the lab's hosts by hand (no Slurm) ---------------------------------------------

    def start_on(self, node, args, name, env=None, cwd=None):
        """Runs `args` on a lab host, stdout and stderr to NAME.out and NAME.err; tearDown kills it by PID if
        it still runs (nsenter executes it in place: the PID is the command's). The environment carries the
        test's marker."""
        with open(self.path(f"{name}.out"), "w") as out, open(self.path(f"{name}.err"), "w") as err:
            p = subprocess.Popen(on_node(node, args), env=env or self.munge_env(), cwd=cwd or self.dir,
                                 stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        self.procs.append(p)
        return p

    def finish(self, p, name):
        try:
            p.wait(timeout=BOUND)
        except subprocess.TimeoutExpired:
            self.fail(f"{name} still runs after {BOUND}s:\n{self.read(name + '.err')}")
        return p.returncode

    def held_worker(self):
        """A worker that says it is up (up-RANK), then waits for the test's `go` (at most BOUND s)."""
        path = self.path("held.sh")
        with open(path, "w") as f:
            f.write(f"""#!/bin/bash
echo "worker $RANK/$WORLD_SIZE on $(hostname)"
touch {self.dir}/up-$RANK
for ((i = 0; i < {BOUND * 20}; i++)); do [ -e {self.dir}/go ] && exit 0; sleep 0.05; done
exit 1
""")
        os.chmod(path, 0o755)
        return path

    def wait_up(self, ranks, *procs):
        def up_or_ended():
            return all(os.path.exists(self.path(f"up-{r}")) for r in ranks) or any(
                p.poll() is not None for p in procs)
        wait_for(up_or_ended, timeout=BOUND)
        missing = [r for r in ranks if not os.path.exists(self.path(f"up-{r}"))]
        said = "".join(f"\n-- {n}:\n{self.read(n)}" for n in sorted(os.listdir(self.dir)) if n.endswith(".err"))
        self.assertEqual(missing, [], f"workers not up{said}")

    def refused_arrival(self, name, args, env=None):
        """Runs an arriving distrun on node3 that node 0 must refuse: it ends non-zero within 20 s (admitted, it
        would wait as a spare until the job ends). Returns its stderr."""
        p = self.start_on(NODES[2], args, name, env=env)
        self.assertTrue(wait_for(lambda: p.poll() is not None, timeout=20),
                        f"{name}'s distrun was not refused:\n" + self.read(f"{name}.err"))
        self.assertNotEqual(p.returncode, 0, self.read(f"{name}.err"))
        return self.read(f"{name}.err")

    def python_module(self):
        """The distrun Python package and its client library, where uid 4242 can read them."""
        py = self.path("py")
        shutil.copytree(os.path.join(REPO, "python", "distrun"), os.path.join(py, "distrun"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(os.path.join(os.path.dirname(DISTRUN), "lib", "libdistrun_client.so.0"), py)
        for base, dirs, files in os.walk(self.dir):
            os.chmod(base, 0o755)
            for f in files:
                os.chmod(os.path.join(base, f), 0o755)
        return py

    def stranger_distrun(self):
        """distrun as uid 4242 can execute it: this build's, or a copy (with its sentinel and runtime module) in the scratch
        directory when the build's directories are closed to other users."""
        sentinel = os.path.join(os.path.dirname(DISTRUN), "distrun-sentinel")
        module = os.path.join(os.path.dirname(DISTRUN), "distrun-runtime.so")
        probe = subprocess.run([*AS_STRANGER, "test", "-x", DISTRUN, "-a", "-x", sentinel, "-a", "-r", module])
        if probe.returncode == 0:
            return DISTRUN
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        for f in (DISTRUN, sentinel, module):
            shutil.copy(f, bin_dir)
        for d in (self.dir, bin_dir):
            os.chmod(d, 0o755)
        return os.path.join(bin_dir, "distrun")

    # -- the tests ---------------------------------------------------------------------------------------------

    def test_a_job_without_token_forms_with_munge_and_its_workers_share_node_0s_token(self):
        n, per_node = len(NODES), 2
        world = n * per_node
        worker = self.path("worker.sh")
        # Rank 0 writes a key; every rank reads it (kv get waits for it) and says which token it was handed,
        # then all-reduces with torch over the job's store.
        with open(worker, "w") as f:
            f.write(f"""#!/bin/bash
if [ "$RANK" = 0 ]; then {DISTRUN} kv set munge-key "from-$(hostname)" || exit 7; fi
got=$({DISTRUN} kv get munge-key --timeout 30) || exit 8
shape=other; [[ $DISTRUN_TOKEN =~ ^[0-9a-f]{{32}}$ ]] && shape=random32
echo "kv rank=$RANK host=$(hostname) got=$got token=$(printf %s "$DISTRUN_TOKEN" | sha256sum | cut -c1-16) shape=$shape"
exec {PYTHON} {TORCH_ALLREDUCE}
""")
        os.chmod(worker, 0o755)
        r = self.srun([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN,
                       "--nproc-per-node", str(per_node), "--", worker], env=self.munge_env(), timeout=BOUND)
        errors = self.errors(n)
        said = f"{r.stdout}\n{r.stderr}\n{errors}"
        self.assertEqual(r.returncode, 0, said)
        # Node 0 says munge protects the job; no node warns that nothing does, and nothing was refused.
        self.assertIn(PROTECTION, errors[0], said)
        for t, text in errors.items():
            self.assertNotIn(NO_TOKEN, text, f"task {t}: {text}")
            self.assertNotIn("refused", text, f"task {t}: {text}")
        self.assertNotIn(NO_TOKEN, r.stderr + r.stdout)
        # Every worker on every host holds node 0's random token (a derived one would read job-...), so the
        # key rank 0 wrote on node1 is read on all three hosts.
        kv = [dict(w.split("=", 1) for w in line.split("kv ", 1)[1].split())
              for line in r.stdout.splitlines() if "kv rank=" in line]
        self.assertEqual(sorted(int(k["rank"]) for k in kv), list(range(world)), r.stdout)
        self.assertEqual({k["host"] for k in kv}, set(NODES), r.stdout)
        self.assertEqual({k["got"] for k in kv}, {f"from-{NODES[0]}"}, r.stdout)
        self.assertEqual({k["shape"] for k in kv}, {"random32"}, r.stdout)
        self.assertEqual(len({k["token"] for k in kv}), 1, r.stdout)
        # torch all-reduces over all six workers.
        lines = [line for line in r.stdout.splitlines() if "all_reduce" in line]
        self.assertEqual(len(lines), world, r.stdout)
        expected = world * (world + 1) // 2
        for line in lines:
            self.assertIn(f"/{world} ", line)
            self.assertIn(f"sum = {expected} (expected {expected}) OK", line)

    def test_mungeds_socket_comes_from_slurms_configuration(self):
        # No DISTRUN_MUNGE_SOCKET: the lab's munged is not at libmunge's default; slurm.conf says where.
        env = self.env(DISTRUN_TOKEN=None)
        r = self.srun(["-N2", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN, "--", "true"], env=env,
                      timeout=BOUND)
        errors = self.errors(2)
        self.assertEqual(r.returncode, 0, f"{r.stderr}\n{errors}")
        self.assertIn(f"{PROTECTION}; munged at {MUNGE_SOCKET} (AuthInfo in {SLURM_CONF})", errors[0])
        for text in errors.values():
            self.assertNotIn(NO_TOKEN, text)
        # --detect in such a step says where the socket came from.
        d = self.srun(["-N2", "--ntasks-per-node=1", DISTRUN, "--detect"], env=env, timeout=BOUND)
        self.assertEqual(d.returncode, 0, d.stderr)
        self.assertIn(f"munged at {MUNGE_SOCKET} (AuthInfo in {SLURM_CONF})", d.stdout)
        # A slurm.conf distrun cannot read never stops a job: one line, then as without it (no munged at
        # libmunge's default socket here: the job runs unprotected, and says so).
        bad = self.srun(["-N2", "--ntasks-per-node=1", "--error", self.path("bad-%t.err"), "env",
                         "SLURM_CONF=/nonexistent/slurm.conf", DISTRUN, "--", "true"], env=env, timeout=BOUND)
        said = self.read("bad-0.err")
        self.assertEqual(bad.returncode, 0, bad.stderr + said)
        self.assertIn("the munge socket in Slurm's configuration is unknown: cannot read /nonexistent/slurm.conf; "
                      "using libmunge's default socket", said)
        self.assertIn(NO_TOKEN, said)

    def test_an_agent_of_another_user_is_refused_and_the_job_goes_on(self):
        port = free_port()
        worker = self.held_worker()
        job = ["--nnodes", "2:3", "--run-id", self.marker_value, "--nproc-per-node", "1", "--grace-period", "2"]
        # An elastic job of two root nodes, started by hand; it admits arrivals while fewer than 3 live.
        first = ["--coordinator-address", f"{NODES[0]}:{port}", "--num-nodes", "2", *job]
        node0 = self.start_on(NODES[0], [DISTRUN, *first, "--node-rank", "0", "--", worker], "node0")
        node1 = self.start_on(NODES[1], [DISTRUN, *first, "--node-rank", "1", "--", worker], "node1")
        self.wait_up([0, 1], node0, node1)
        # uid 4242 arrives on node3 (no token: it proves its user with munge, as its own).
        arrival = ["--join", f"{NODES[0]}:{port}", *job]
        stranger = self.stranger_distrun()
        err = self.refused_arrival("stranger", [*AS_STRANGER, stranger, *arrival, "--", worker])
        self.assertIn(f"rendezvous failed: cannot join the distrun runtime at {NODES[0]}:{port}: node 0 refused "
                      f"this node: its munge credential is uid {STRANGER_UID}'s, not the job's user (uid 0)", err)
        refusal = f"its munge credential is uid {STRANGER_UID}'s, not the job's user (uid 0) (1 refused so far)"
        self.assertTrue(wait_for(lambda: refusal in self.read("node0.err"), timeout=5), self.read("node0.err"))
        self.assertRegex(self.read("node0.err"), rf"refused an agent from 10\.99\.0\.13:\d+: {re.escape(refusal)}")
        # Nor does an agent get in that brings a token of its own and no credential (node 0's user, munge off).
        err = self.refused_arrival("bare", [DISTRUN, *arrival, "--munge", "off", "--", worker],
                                   env=self.munge_env(DISTRUN_TOKEN=uuid.uuid4().hex))
        self.assertIn("node 0 refused this node: its hello carried no munge credential, which this job requires",
                      err)
        self.assertTrue(wait_for(lambda: "(2 refused so far)" in self.read("node0.err"), timeout=5),
                        self.read("node0.err"))
        self.assertFalse(os.path.exists(self.path("up-2")), "a refused agent's worker ran")
        # The seat the stranger wanted is still free: node 0's own user arrives there as node 2.
        root = self.start_on(NODES[2], [DISTRUN, *arrival, "--", worker], "root-arrival")
        self.assertTrue(wait_for(lambda: "admitted as node 2" in self.read("root-arrival.err"), timeout=BOUND),
                        self.read("root-arrival.err"))
        # `distrun status` from another host, outside the job and without its token: a munge credential of
        # node 0's user stands for the token; uid 4242's is refused, and node 0 logs why.
        status_env = self.munge_env(DISTRUN_COORDINATOR_ADDRESS=f"{NODES[0]}:{port}")
        ok = subprocess.run(on_node(NODES[1], [DISTRUN, "status"]), env=status_env, capture_output=True,
                            text=True, timeout=30)
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("job running, epoch 0, 2 node(s)", ok.stdout)
        self.assertIn(f"node 2 ({NODES[2]}): spare", ok.stdout)  # the arrival, waiting for a seat
        bad = subprocess.run(on_node(NODES[1], [*AS_STRANGER, stranger, "status"]), env=status_env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 3, bad.stderr)
        self.assertIn(f"refused this user's munge credential (munge credential refused: the munge credential is "
                      f"uid {STRANGER_UID}'s, not the job's user (uid 0))", bad.stderr)
        self.assertTrue(wait_for(lambda: "refused a Describe call from" in self.read("node0.err"), timeout=5),
                        self.read("node0.err"))
        # The Python module's Client, given only the address, proves its user the same way.
        py = self.python_module()
        client = ("import distrun, os\n"
                  "c = distrun.Client(os.environ['DISTRUN_COORDINATOR_ADDRESS'])\n"
                  "try:\n"
                  "    c.set('py-key', 'from python')\n"
                  "    print('python', c.get('py-key', text=True))\n"
                  "except distrun.UnauthenticatedError as e:\n"
                  "    print('refused', e)\n")
        py_env = dict(status_env, PYTHONPATH=py, DISTRUN_CLIENT_LIBRARY=os.path.join(py, "libdistrun_client.so.0"))
        ok = subprocess.run(on_node(NODES[1], [PYTHON, "-c", client]), env=py_env, capture_output=True, text=True,
                            timeout=30)
        self.assertEqual((ok.returncode, ok.stdout), (0, "python from python\n"), ok.stderr)
        bad = subprocess.run(on_node(NODES[1], [*AS_STRANGER, PYTHON, "-c", client]), env=py_env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(bad.returncode, 0, bad.stderr)
        self.assertEqual(bad.stdout, f"refused the runtime at {NODES[0]}:{port} refused this user's munge credential "
                                     f"(munge credential refused: the munge credential is uid {STRANGER_UID}'s, not "
                                     "the job's user (uid 0)); a job protected by a token needs DISTRUN_TOKEN set to "
                                     "it\n")
        with open(self.path("go"), "w"):
            pass
        codes = {name: self.finish(p, name) for name, p in
                 (("node0", node0), ("node1", node1), ("root-arrival", root))}
        self.assertEqual(codes, {"node0": 0, "node1": 0, "root-arrival": 0},
                         self.read("node0.err") + self.read("node1.err") + self.read("root-arrival.err"))
        self.assertIn(f"node 2 ({NODES[2]}) arrived and was admitted", self.read("node0.err"))
        self.assertEqual(self.read("node0.err").count("refused an agent"), 2, self.read("node0.err"))

    def test_a_replayed_hello_is_refused(self):
        port = free_port()
        worker = self.held_worker()
        record = self.path("hello.bin")
        job = ["--num-nodes", "2", "--run-id", self.marker_value, "--nproc-per-node", "1", "--grace-period", "2"]
        node0 = self.start_on(NODES[0], [DISTRUN, "--coordinator-address", f"{NODES[0]}:{port}", *job,
                                         "--node-rank", "0", "--", worker], "node0")
        # node2's distrun reaches node 0 through a proxy on node3 on the same port (its credential names the
        # port), which records what it sent.
        proxy = self.start_on(NODES[2], [PYTHON, "-c", PROXY, port, NODES[0], port, record], "proxy")
        self.assertTrue(wait_for(lambda: os.path.exists(record + ".ready") or proxy.poll() is not None,
                                 timeout=BOUND), self.read("proxy.err"))
        self.assertIsNone(proxy.poll(), self.read("proxy.err"))
        node1 = self.start_on(NODES[1], [DISTRUN, "--coordinator-address", f"{NODES[2]}:{port}", *job,
                                         "--node-rank", "1", "--", worker], "node1")
        self.wait_up([0, 1], node0, node1, proxy)
        with open(record, "rb") as f:
            sent = f.read()
        self.assertTrue(sent.startswith(PREFACE), sent[:64])
        size = int.from_bytes(sent[len(PREFACE):len(PREFACE) + 4], "big")
        hello = sent[:len(PREFACE) + 4 + size]
        self.assertEqual(len(hello), len(PREFACE) + 4 + size, "the recorded opening is shorter than its hello")
        self.assertIn(b"MUNGE:", hello, "the hello carries no munge credential")
        # Anyone who captured those bytes (here: from the login host) sends them to node 0 again.
        r = subprocess.run(on_login_host([PYTHON, "-c", REPLAY, NODES[0], port, hello.hex()]), env=self.munge_env(),
                           capture_output=True, text=True, timeout=BOUND)
        self.assertEqual(r.returncode, 0, r.stderr)
        outcome, _, answer = r.stdout.strip().partition(" ")
        self.assertEqual(outcome, "closed", r.stdout)
        self.assertIn(b"node 0 refused this node: a replayed munge credential", bytes.fromhex(answer), r.stdout)
        self.assertTrue(wait_for(lambda: "replayed" in self.read("node0.err"), timeout=5), self.read("node0.err"))
        self.assertRegex(self.read("node0.err"),
                         r"refused an agent from 10\.99\.0\.1:\d+: a replayed munge credential \(.+\) "
                         r"\(1 refused so far\)")
        # The job itself is unharmed: both workers finish and both distruns exit 0.
        with open(self.path("go"), "w"):
            pass
        codes = {name: self.finish(p, name) for name, p in (("node0", node0), ("node1", node1))}
        self.assertEqual(codes, {"node0": 0, "node1": 0}, self.read("node0.err") + self.read("node1.err"))
        self.assertIn(PROTECTION, self.read("node0.err"))

    def test_munged_not_answering(self):
        n = len(NODES)
        # --munge require: every distrun stops at once, saying why.
        r = self.srun([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("%t.err"), DISTRUN, "--munge",
                       "require", "--nproc-per-node", "1", "--", "/bin/echo", "worker ran"],
                      env=self.munge_env(DISTRUN_MUNGE_SOCKET=MISSING_SOCKET), timeout=BOUND)
        errors = self.errors(n)
        self.assertEqual(r.returncode, 2, f"{r.stdout}\n{r.stderr}\n{errors}")
        self.assertNotIn("worker ran", r.stdout)
        for t, text in errors.items():
            self.assertIn(f"distrun: error: --munge require, but munged does not answer at {MISSING_SOCKET}: ", text,
                          f"task {t}")
        self.assertEqual(len(re.findall(r"task \d+: Exited with exit code 2", r.stderr)), n, r.stderr)
        # auto: the job runs as before munge, on a token derived from the job, and every node says so.
        r = self.srun([f"-N{n}", "--ntasks-per-node=1", "--error", self.path("auto-%t.err"), DISTRUN,
                       "--nproc-per-node", "1", "--", "/bin/sh", "-c", 'echo "worker $RANK ran"'],
                      env=self.munge_env(DISTRUN_MUNGE_SOCKET=MISSING_SOCKET), timeout=BOUND)
        errors = {t: self.read(f"auto-{t}.err") for t in range(n)}
        self.assertEqual(r.returncode, 0, f"{r.stdout}\n{r.stderr}\n{errors}")
        self.assertEqual(sorted(re.findall(r"worker (\d+) ran", r.stdout)), [str(t) for t in range(n)], r.stdout)
        for t, text in errors.items():
            self.assertIn(f"{NO_TOKEN} and no munge (munged does not answer at {MISSING_SOCKET}: ", text, f"task {t}")
        self.assertNotIn(PROTECTION, errors[0])
        # --detect names the protection on each node: munge with the lab's munged, none or unusable without.
        cases = {"munge": ([], MUNGE_SOCKET), "none": ([], MISSING_SOCKET),
                 "unusable": (["--munge", "require"], MISSING_SOCKET)}
        for name, (args, socket_path) in cases.items():
            r = self.srun(["-N2", "--ntasks-per-node=1", "--output", self.path(f"detect-{name}-%t.json"), DISTRUN,
                           "--detect", "--format", "json", *args],
                          env=self.munge_env(DISTRUN_MUNGE_SOCKET=socket_path), timeout=BOUND)
            self.assertEqual(r.returncode, 0, r.stderr)
            for t in range(2):
                protection = self.read_json(f"detect-{name}-{t}.json")["protection"]
                self.assertTrue(protection.startswith(name), f"{name}, task {t}: {protection}")
                if name != "munge":
                    self.assertIn(f"munged does not answer at {MISSING_SOCKET}", protection)


if __name__ == "__main__":
    main()
