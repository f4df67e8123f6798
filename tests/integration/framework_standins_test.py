"""The stand-in frameworks of tests/frameworks (JAX, Keras, Lightning 2.x, PyTorch Lightning 1.x) against the
documented behaviour of the real ones: how each finds its distributed world from the environment.

Runs without a distrun build: every case is a subprocess of this interpreter with an explicit environment
(PYTHONPATH=tests/frameworks and the variables under test, nothing inherited). JAX cases run for each
modelled release (STANDIN_JAX_VERSION); rendezvous go through the stand-in coordination service on
127.0.0.1. Run as `python3 tests/integration/framework_standins_test.py`.
"""
import http.server
import importlib.util
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

FRAMEWORKS = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "frameworks"))
PROBE = os.path.join(FRAMEWORKS, "probe.py")
PYTHON = sys.executable
JAX_RELEASES = ("0.4.14", "0.4.31", "0.11.2")
OLD, MID, NEW = JAX_RELEASES
HAVE_MPI4PY = importlib.util.find_spec("mpi4py") is not None

# Detection only: JAX's auto_detect_unset_distributed_params with nothing given, in the release's arity.
DETECT = r"""
import json, sys
import jax
from jax._src import _standin
from jax._src.clusters import ClusterEnv
method = sys.argv[1] if len(sys.argv) > 1 else None
args = [None, None, None, None] + ([] if _standin.OLD else [method, 300])
try:
    found = list(ClusterEnv.auto_detect_unset_distributed_params(*args))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
else:
    chosen = ClusterEnv._standin_chosen
    print(json.dumps({"found": found, "env": chosen.__name__ if chosen else None}))
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def environment(**variables):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": FRAMEWORKS, "PYTHONDONTWRITEBYTECODE": "1",
           "HOME": tempfile.gettempdir()}
    env.update({k: str(v) for k, v in variables.items() if v is not None})
    return env


def spawn(args, **variables):
    return subprocess.Popen([PYTHON, *args], env=environment(**variables), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def result(proc, timeout=30):
    """(exit status, the last JSON line of stdout, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    lines = [line for line in out.splitlines() if line.startswith(("{", "["))]
    return proc.returncode, (json.loads(lines[-1]) if lines else None), err


def stop(*procs):
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def slurm(rank, ntasks=2, **more):
    """A Slurm step's variables for task `rank` (JAX reads SLURM_JOB_ID, _NTASKS, _PROCID, _LOCALID and
    _STEP_NODELIST); `more` adds or overrides."""
    world = dict(SLURM_JOB_ID=4242, SLURM_NTASKS=ntasks, SLURM_PROCID=rank, SLURM_LOCALID=rank, SLURM_NODEID=0,
                 SLURM_STEP_NODELIST="localhost")
    world.update(more)
    return world


class MetadataServer:
    """A GCE metadata server for the TPU cases: /computeMetadata/v1/instance/attributes/<key>."""

    def __init__(self, attributes):
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                key = self.path.rsplit("/", 1)[-1]
                ok = self.headers.get("Metadata-Flavor") == "Google" and key in owner.attributes
                body = (owner.attributes[key] if ok else "not found").encode()
                self.send_response(200 if ok else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.attributes = attributes
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class JaxCase(unittest.TestCase):
    def detect(self, release, method=None, **variables):
        args = ["-c", DETECT] + ([method] if method else [])
        code, doc, err = result(spawn(args, STANDIN_JAX_VERSION=release, **variables))
        self.assertEqual(code, 0, err)
        return doc

    def detect_each(self, calls):
        """detect() for each (release, method, variables) at once; the documents in the same order."""
        procs = [spawn(["-c", DETECT] + ([method] if method else []), STANDIN_JAX_VERSION=release, **variables)
                 for release, method, variables in calls]
        docs = []
        for proc in procs:
            code, doc, err = result(proc)
            self.assertEqual(code, 0, err)
            docs.append(doc)
        return docs

    def rendezvous(self, release, worlds, mode="jax"):
        """Runs one probe per environment in `worlds` at once; returns their documents by process id."""
        procs = [spawn([PROBE, mode], STANDIN_JAX_VERSION=release, **world) for world in worlds]
        docs = []
        for proc in procs:
            code, doc, err = result(proc)
            self.assertEqual(code, 0, f"{doc} {err}")
            docs.append(doc)
        return sorted(docs, key=lambda d: d["process_id"])


class JaxRegistry(JaxCase):
    ORDER = {
        OLD: ["OmpiCluster", "SlurmCluster", "TpuCluster"],
        MID: ["OmpiCluster", "SlurmCluster", "Mpi4pyCluster", "BaseTpuCluster", "GceTpuCluster", "GkeTpuCluster"],
        NEW: ["PrrteCluster", "OmpiCluster", "SlurmCluster", "Mpi4pyCluster", "BaseTpuCluster", "GceTpuCluster",
              "GkeTpuCluster", "K8sCluster"],
    }
    LATE = r"""
import json, os, sys
import jax
from jax._src import _standin, clusters
class LateCluster(clusters.ClusterEnv):
    name = "late"
    opt_in_only_method = False
    @classmethod
    def is_env_present(cls): return True
    @classmethod
    def get_coordinator_address(cls, *args, **kwargs): return "late-host:1"
    @classmethod
    def get_process_count(cls): return 7
    @classmethod
    def get_process_id(cls): return 6
types = clusters.ClusterEnv._cluster_types
doc = {"order": [c.__name__ for c in types]}
if sys.argv[1] == "front":  # what a launcher hooking jax._src.clusters does
    types[:] = [LateCluster] + [c for c in types if c is not LateCluster]
args = [None, None, None, None] + ([] if _standin.OLD else [sys.argv[2] or None, 300])
doc["found"] = list(clusters.ClusterEnv.auto_detect_unset_distributed_params(*args))
print(json.dumps(doc))
"""

    def test_import_registers_clusters_in_release_order(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                code = ("import json, sys, jax; from jax._src import clusters; print(json.dumps("
                        "[jax.__version__, 'jax._src.clusters' in sys.modules, "
                        "[c.__name__ for c in clusters.ClusterEnv._cluster_types]]))")
                rc, doc, err = result(spawn(["-c", code], STANDIN_JAX_VERSION=release))
                self.assertEqual(rc, 0, err)
                self.assertEqual(doc, [release, True, self.ORDER[release]])

    def test_unmodelled_release_fails_the_import(self):
        rc, _, err = result(spawn(["-c", "import jax"], STANDIN_JAX_VERSION="0.4.30"))
        self.assertNotEqual(rc, 0)
        self.assertIn("not modelled", err)

    def test_subclass_defined_after_import_lands_last(self):
        procs = [(spawn(["-c", self.LATE, where, ""], STANDIN_JAX_VERSION=release, **slurm(1)))
                 for release in JAX_RELEASES for where in ("stay", "front")]
        docs = iter(result(proc) for proc in procs)
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                rc, doc, err = next(docs)
                self.assertEqual(rc, 0, err)
                self.assertEqual(doc["order"], self.ORDER[release] + ["LateCluster"])
                # Slurm comes first, so the late class is never asked.
                self.assertEqual(doc["found"], ["localhost:61586", 2, 1, [1]])
                # Moved to the front, as a launcher hooking jax._src.clusters does, it answers.
                rc, doc, err = next(docs)
                self.assertEqual(doc["found"], ["late-host:1", 7, 6, None], err)

    def test_cluster_detection_method_selects_by_name(self):
        for release in (MID, NEW):
            with self.subTest(release=release):
                # 0.4.31: every class before it has a name. Newest: the nameless K8sCluster would be asked for
                # one first, so the class is moved to the front, as a launcher's is.
                where = "stay" if release == MID else "front"
                rc, doc, err = result(spawn(["-c", self.LATE, where, "late"], STANDIN_JAX_VERSION=release,
                                            **slurm(1)))
                self.assertEqual(rc, 0, err)
                self.assertEqual(doc["found"], ["late-host:1", 7, 6, None])
                doc = self.detect(release, "slurm", **slurm(1))
                self.assertEqual(doc, {"found": ["localhost:61586", 2, 1, [1]], "env": "SlurmCluster"})
                if release == MID:
                    # An unknown name: JAX logs an error and fills nothing, even with Slurm present.
                    doc = self.detect(release, "nothing-by-that-name", **slurm(1))
                    self.assertEqual(doc, {"found": [None, None, None, None], "env": None})

    def test_mpi4py_is_opt_in(self):
        for release in (MID, NEW):
            with self.subTest(release=release):
                self.assertEqual(self.detect(release), {"found": [None, None, None, None], "env": None})
                doc = self.detect(release, "mpi4py")
                if HAVE_MPI4PY:
                    self.assertEqual(doc["env"], "Mpi4pyCluster")
                    self.assertEqual(doc["found"][1:], [1, 0, [0]])  # a singleton MPI world
                    host, port = doc["found"][0].rsplit(":", 1)
                    self.assertEqual(host, socket.gethostname())
                    self.assertTrue(61440 <= int(port) <= 65535)
                else:
                    # Named but absent: JAX logs it and still asks the class, which needs mpi4py.
                    self.assertIn("No module named 'mpi4py'", doc["error"])


class JaxSlurmAndMpi(JaxCase):
    def test_slurm_world_and_port_rule(self):
        ranged = slurm(0, ntasks=8, SLURM_STEP_NODELIST="node[007-010,012],login1", SLURM_JOB_ID=1234567)
        calls = []
        for release in JAX_RELEASES:
            calls += [(release, None, slurm(1)), (release, None, ranged),
                      (release, None, slurm(1, JAX_COORDINATOR_PORT=23456))]
        docs = iter(self.detect_each(calls))
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                # port = SLURM_JOB_ID % 4096 + 61440, host = the step's first node
                self.assertEqual(next(docs), {"found": ["localhost:61586", 2, 1, [1]], "env": "SlurmCluster"})
                self.assertEqual(next(docs)["found"], ["node007:" + str(1234567 % 4096 + 61440), 8, 0, [0]])
                # Only the newest sources take JAX_COORDINATOR_PORT.
                self.assertEqual(next(docs)["found"][0], "localhost:23456" if release == NEW else "localhost:61586")

    def test_two_slurm_tasks_rendezvous(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                address = f"127.0.0.1:{free_port()}"
                docs = self.rendezvous(release, [slurm(r, JAX_COORDINATOR_ADDRESS=address, DISTRUN_PROCESS_ID=r)
                                                 for r in (1, 0)])
                for rank, doc in enumerate(docs):
                    self.assertEqual(doc["jax_version"], release)
                    self.assertEqual((doc["coordinator"], doc["num_processes"], doc["process_id"]),
                                     (address, 2, rank))
                    self.assertEqual(doc["local_device_ids"], [rank])
                    self.assertEqual(doc["cluster_env"], "SlurmCluster")
                    self.assertEqual(doc["all_ids"], [0, 1])
                    self.assertEqual((doc["process_index"], doc["process_count"]), (rank, 2))
                    self.assertEqual(doc["distrun_rank"], str(rank))

    def test_open_mpi_4(self):
        uri = "1531576320.0;tcp://10.96.0.1,10.148.0.1,10.108.0.1:34911"
        uri6 = "1314521088.0;tcp6://[fe80::b9b:ac5d:9cf0:b858,2620:10d:c083:150e::3000:2]:43370"
        ranks = dict(OMPI_COMM_WORLD_SIZE=4, OMPI_COMM_WORLD_RANK=3, OMPI_COMM_WORLD_LOCAL_RANK=1)
        calls = []
        for release in JAX_RELEASES:
            calls += [(release, None, dict(OMPI_MCA_orte_hnp_uri=uri, **ranks)),
                      (release, None, dict(OMPI_MCA_orte_hnp_uri=uri6, **ranks)),
                      (release, None, dict(OMPI_MCA_orte_hnp_uri=uri, **ranks, **slurm(0)))]
        docs = iter(self.detect_each(calls))
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                # port = (job id // 4096) % 4096 + 61440; the launcher's first address
                self.assertEqual(next(docs), {"found": ["10.96.0.1:62624", 4, 3, [1]], "env": "OmpiCluster"})
                self.assertEqual(next(docs)["found"][0],
                                 "fe80::b9b:ac5d:9cf0:b858:" + str(1314521088 // 4096 % 4096 + 61440))
                # Open MPI first, Slurm second.
                self.assertEqual(next(docs)["env"], "OmpiCluster")

    def test_open_mpi_5_and_prrte_in_the_newest_sources(self):
        ranks = dict(OMPI_COMM_WORLD_SIZE=8, OMPI_COMM_WORLD_RANK=3, OMPI_COMM_WORLD_LOCAL_RANK=1)
        prrte = dict(PRTE_LAUNCHED=1, PMIX_NAMESPACE="prterun-node18-12345@1",
                     PMIX_SERVER_URI41="prterun-node18-12345@0.0;tcp4://10.20.30.40:45678", **ranks)
        self.assertEqual(self.detect(NEW, **prrte),
                         {"found": ["10.20.30.40:61497", 8, 3, [1]], "env": "PrrteCluster"})
        self.assertEqual(self.detect(NEW, JAX_COORDINATOR_PORT=1234, **prrte)["found"][0], "10.20.30.40:1234")
        # Open MPI 5 without PRRTE's variables: the Open MPI cluster answers through mpi4py.
        doc = self.detect(NEW, OMPI_VERSION="5.0.3", **ranks)
        if HAVE_MPI4PY:
            self.assertEqual(doc["env"], "OmpiCluster")
            self.assertEqual(doc["found"][1:], [1, 0, [0]])  # mpi4py's singleton world, not OMPI_COMM_WORLD_*
        else:
            self.assertEqual(doc["error"], "RuntimeError: Open MPI 5 or newer requires mpi4py for distributed "
                                           "initialization.")
        for release in (OLD, MID):
            self.assertEqual(self.detect(release, OMPI_VERSION="5.0.3", **prrte)["env"], None)


class JaxKubernetes(JaxCase):
    def test_kubernetes_without_its_client_package(self):
        code, doc, err = result(spawn(["-c", DETECT], STANDIN_JAX_VERSION=NEW, KUBERNETES_SERVICE_HOST="10.0.0.1"))
        self.assertEqual(doc, {"found": [None, None, None, None], "env": None})
        self.assertIn("pip install jax[k8s]", err)


class JaxErrors(JaxCase):
    def test_nothing_to_detect(self):
        procs = []
        for release in JAX_RELEASES:
            procs.append(spawn([PROBE, "jax"], STANDIN_JAX_VERSION=release))
            procs.append(spawn([PROBE, "jax"], STANDIN_JAX_VERSION=release, JAX_COORDINATOR_ADDRESS="127.0.0.1:1"))
        docs = iter(result(proc)[:2] for proc in procs)
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                self.assertEqual(next(docs), (1, {"mode": "jax", "distrun_rank": None, "jax_version": release,
                                                  "error": "ValueError: coordinator_address should be defined."}))
                code, doc = next(docs)
                self.assertEqual((code, doc["error"]), (1, "ValueError: Number of processes must be defined."))
        # "deactivate" skips detection (newest sources): the Slurm variables are not read.
        code, _, err = result(spawn(["-c", "import jax; jax.distributed.initialize(cluster_detection_method="
                                     "'deactivate')"], STANDIN_JAX_VERSION=NEW, JAX_COORDINATOR_ADDRESS="h:1",
                                    **slurm(0)))
        self.assertIn("ValueError: Number of processes must be defined.", err)

    def test_wrong_worlds_are_refused_by_the_service(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                address = f"127.0.0.1:{free_port()}"
                world = dict(JAX_COORDINATOR_ADDRESS=address, STANDIN_JAX_VERSION=release)
                zero = spawn([PROBE, "jax"], **world, **slurm(0, ntasks=3))
                twins = [spawn([PROBE, "jax"], **world, **slurm(1, ntasks=3)) for _ in range(2)]
                other_count = spawn([PROBE, "jax"], **world, **slurm(2, ntasks=4))
                try:
                    code, doc, err = result(other_count)
                    self.assertEqual(code, 1, err)
                    self.assertTrue(doc["error"].startswith("XlaRuntimeError: INVALID_ARGUMENT"), doc)
                    self.assertIn("joined a job of 4 processes", doc["error"])
                    deadline = time.monotonic() + 20
                    while all(p.poll() is None for p in twins) and time.monotonic() < deadline:
                        time.sleep(0.05)
                    loser = next(p for p in twins if p.poll() is not None)
                    code, doc, err = result(loser)
                    self.assertEqual(code, 1, err)
                    self.assertTrue(doc["error"].startswith("XlaRuntimeError: ALREADY_EXISTS"), doc)
                    # An id out of range: refused by the service, or by initialize() in the newest sources.
                    code, doc, err = result(spawn([PROBE, "jax"], **world, **slurm(5, ntasks=3)))
                    self.assertEqual(code, 1, err)
                    if release == NEW:
                        self.assertTrue(doc["error"].startswith("ValueError: process_id and num_processes"), doc)
                    else:
                        self.assertTrue(doc["error"].startswith("XlaRuntimeError: INVALID_ARGUMENT: Unexpected "
                                                                "task"), doc)
                finally:
                    stop(zero, *twins)

    def test_service_errors_are_runtime_errors_and_initialize_runs_once(self):
        script = r"""
import jax
from jax._src.lib import xla_extension
assert issubclass(xla_extension.XlaRuntimeError, RuntimeError)
jax.distributed.initialize(process_id=0, num_processes=1)
try:
    jax.distributed.initialize(process_id=0, num_processes=1)
except RuntimeError as e:
    print(e)
"""
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                proc = spawn(["-c", script], STANDIN_JAX_VERSION=release,
                             JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}")
                out, err = proc.communicate(timeout=30)
                self.assertEqual(out.strip(), "distributed.initialize should only be called once.", err)

    def test_backends_created_before_initialize(self):
        script = ("import jax; jax.process_index(); "
                  "jax.distributed.initialize(process_id=0, num_processes=1); print('initialized')")
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                proc = spawn(["-c", script], STANDIN_JAX_VERSION=release,
                             JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}")
                out, err = proc.communicate(timeout=30)
                if release == OLD:
                    self.assertEqual(out.strip(), "initialized", err)
                else:
                    self.assertIn("RuntimeError: jax.distributed.initialize() must be called before", err)

    def test_jax_local_device_ids_only_in_the_newest_sources(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                docs = self.rendezvous(release, [slurm(0, ntasks=1, JAX_LOCAL_DEVICE_IDS="2,3",
                                                       JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{free_port()}")])
                self.assertEqual(docs[0]["local_device_ids"], [2, 3] if release == NEW else [0])


class JaxTpu(JaxCase):
    @classmethod
    def setUpClass(cls):
        cls.metadata = MetadataServer({
            "worker-network-endpoints": "unknown:unknown:127.0.0.1,unknown:unknown:127.0.0.2",
            "agent-worker-number": "1",
            "tpu-env": "ACCELERATOR_TYPE: 'v5litepod-8'\nTPU_CHIPS_PER_HOST_BOUNDS: '2,2,1'\n",
        })

    @classmethod
    def tearDownClass(cls):
        cls.metadata.close()

    def gke(self, rank, **more):
        return dict(STANDIN_TPU_VM=1, TPU_WORKER_HOSTNAMES="127.0.0.1,127.0.0.2", TPU_WORKER_ID=rank,
                    TPU_SKIP_MDS_QUERY="true", GCE_METADATA_IP=self.metadata.address, **more)

    def test_no_local_device_ids_on_a_tpu_vm(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                self.assertEqual(self.detect(release, STANDIN_TPU_VM=1, **slurm(1)),
                                 {"found": ["localhost:61586", 2, 1, None], "env": "SlurmCluster"})

    def test_gke_variables(self):
        for release in (MID, NEW):
            with self.subTest(release=release):
                self.assertEqual(self.detect(release, **self.gke(1)),
                                 {"found": ["127.0.0.1:8476", 2, 1, None], "env": "GkeTpuCluster"})
        self.assertEqual(self.detect(NEW, JAX_COORDINATOR_PORT=8482, **self.gke(1))["found"][0], "127.0.0.1:8482")
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write(" 127.0.0.9:8476,127.0.0.8:8476,127.0.0.7:8476 \n")
            f.flush()
            doc = self.detect(NEW, TPU_PROCESS_ADDRESSES_PATH=f.name, TPU_PROCESS_ADDRESSES="127.0.0.5:8476",
                              **self.gke(2))
            self.assertEqual(doc["found"], ["127.0.0.9:8476", 3, 2, None])
        # Without libtpu's chips it is no TPU cluster.
        gke = self.gke(1)
        del gke["STANDIN_TPU_VM"]
        self.assertEqual(self.detect(NEW, **gke)["env"], None)

    def test_gke_rendezvous(self):
        for release in (MID, NEW):
            with self.subTest(release=release):
                address = f"127.0.0.1:{free_port()}"
                docs = self.rendezvous(release, [self.gke(r, JAX_COORDINATOR_ADDRESS=address) for r in (0, 1)])
                self.assertEqual([(d["process_id"], d["num_processes"], d["local_device_ids"], d["cluster_env"],
                                   d["all_ids"]) for d in docs],
                                 [(r, 2, None, "GkeTpuCluster", [0, 1]) for r in (0, 1)])

    def test_gce_tpu_vm_metadata(self):
        # 0.4.31 and later: GceTpuCluster (registered before GkeTpuCluster) asks the metadata server.
        for release in (MID, NEW):
            with self.subTest(release=release):
                self.assertEqual(self.detect(release, STANDIN_TPU_VM=1, GCE_METADATA_IP=self.metadata.address),
                                 {"found": ["127.0.0.1:8476", 2, 1, None], "env": "GceTpuCluster"})

    def test_tpu_vm_metadata_in_0_4_14(self):
        doc = self.detect(OLD, STANDIN_TPU_VM=1, STANDIN_TPU_PROCESS_COUNT=2, GCE_METADATA_IP=self.metadata.address)
        self.assertEqual(doc, {"found": ["127.0.0.1:8476", 2, 1, None], "env": "TpuCluster"})
        # 0.4.14 reads no GKE variable: only the metadata server.
        gke = dict(self.gke(0), GCE_METADATA_IP=f"127.0.0.1:{free_port()}")
        doc = self.detect(OLD, STANDIN_TPU_PROCESS_COUNT=2, **gke)
        self.assertTrue(doc["error"].startswith("ConnectionError"), doc)


class KerasDistribution(JaxCase):
    def test_job_addresses_from_the_environment(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                port = free_port()
                addresses = f"127.0.0.1:{port},127.0.0.1:{free_port()}"
                docs = self.rendezvous(release, [dict(KERAS_BACKEND="jax", KERAS_DISTRIBUTION_JOB_ADDRESSES=addresses,
                                                      KERAS_DISTRIBUTION_NUM_PROCESSES=2,
                                                      KERAS_DISTRIBUTION_PROCESS_ID=r) for r in (0, 1)],
                                       mode="keras")
                for rank, doc in enumerate(docs):
                    self.assertEqual((doc["coordinator"], doc["num_processes"], doc["process_id"], doc["all_ids"]),
                                     (f"127.0.0.1:{port}", 2, rank, [0, 1]))
                    # Keras passes no local_device_ids and nothing else is detected.
                    self.assertEqual((doc["local_device_ids"], doc["cluster_env"]), (None, None))

    def test_keras_leaves_local_devices_to_jax(self):
        for release in JAX_RELEASES:
            with self.subTest(release=release):
                docs = self.rendezvous(release, [dict(KERAS_BACKEND="jax", KERAS_DISTRIBUTION_NUM_PROCESSES=1,
                                                      KERAS_DISTRIBUTION_PROCESS_ID=0,
                                                      KERAS_DISTRIBUTION_JOB_ADDRESSES=f"127.0.0.1:{free_port()}",
                                                      **slurm(0, ntasks=1, SLURM_LOCALID=3))], mode="keras")
                self.assertEqual((docs[0]["local_device_ids"], docs[0]["cluster_env"]), ([3], "SlurmCluster"))

    def test_errors(self):
        code, doc, _ = result(spawn([PROBE, "keras"], KERAS_BACKEND="jax",
                                    KERAS_DISTRIBUTION_JOB_ADDRESSES="10.0.0.1:1234,10.0.0.2:2345",
                                    KERAS_DISTRIBUTION_NUM_PROCESSES=3, KERAS_DISTRIBUTION_PROCESS_ID=0))
        self.assertEqual(code, 1)
        self.assertEqual(doc["error"], "ValueError: The provided job_addresses ['10.0.0.1:1234', '10.0.0.2:2345'] "
                                       "has 2 jobs, but num_processes is 3")
        # The default backend is TensorFlow, which this machine lacks, as the real Keras would.
        code, doc, _ = result(spawn([PROBE, "keras"]))
        self.assertEqual(doc["error"], "ModuleNotFoundError: No module named 'tensorflow'")
        code, doc, _ = result(spawn([PROBE, "keras"], KERAS_BACKEND="numpy"))
        self.assertEqual(doc["error"], "AttributeError: 'NoneType' object has no attribute 'initialize'")


class Lightning(unittest.TestCase):
    def choose(self, mode, *args, **variables):
        code, doc, err = result(spawn([PROBE, mode, *map(str, args)], **variables))
        return doc

    SLURM = dict(SLURM_JOB_ID=123456, SLURM_NTASKS=4, SLURM_NTASKS_PER_NODE=2, SLURM_PROCID=3, SLURM_LOCALID=1,
                 SLURM_NODEID=1, SLURM_NODELIST="gpu[07-08]")
    ELASTIC = dict(TORCHELASTIC_RUN_ID="run", WORLD_SIZE=8, RANK=5, LOCAL_RANK=1, GROUP_RANK=2,
                   MASTER_ADDR="10.1.1.1", MASTER_PORT=29500)

    def test_lightning_2_prefers_torchelastic_over_slurm(self):
        doc = self.choose("lightning", **self.SLURM, **self.ELASTIC)
        self.assertEqual({k: doc[k] for k in ("environment", "world_size", "global_rank", "local_rank", "node_rank",
                                              "main_address", "main_port")},
                         {"environment": "TorchElasticEnvironment", "world_size": 8, "global_rank": 5,
                          "local_rank": 1, "node_rank": 2, "main_address": "10.1.1.1", "main_port": 29500})
        doc = self.choose("lightning", **self.SLURM)
        self.assertEqual({k: doc[k] for k in ("environment", "world_size", "global_rank", "local_rank", "node_rank",
                                              "main_address", "main_port")},
                         {"environment": "SLURMEnvironment", "world_size": 4, "global_rank": 3, "local_rank": 1,
                          "node_rank": 1, "main_address": "gpu07", "main_port": 3456 + 15000})

    def test_lightning_2_slurm_rules(self):
        slurm = dict(self.SLURM)
        del slurm["SLURM_NTASKS_PER_NODE"]
        doc = self.choose("lightning", **slurm)
        self.assertEqual(doc["error"], "RuntimeError: You set `--ntasks=4` in your SLURM bash script, but this "
                                       "variable is not supported. HINT: Use `--ntasks-per-node=4` instead.")
        # Interactive jobs are not SLURM's (asked directly: the next candidate, MPIEnvironment, would start MPI
        # in a Slurm allocation, which this host's Open MPI refuses).
        detect = ("import json; from lightning.fabric.plugins.environments import SLURMEnvironment; "
                  "print(json.dumps([SLURMEnvironment.detect()]))")
        for name, expected in (("bash", False), ("interactive", False), ("train", True)):
            code, doc, err = result(spawn(["-W", "ignore", "-c", detect], SLURM_JOB_NAME=name, **self.SLURM))
            self.assertEqual(doc, [expected], err)
        self.assertEqual(self.choose("lightning", MASTER_ADDR="10.9.9.9", **self.SLURM)["main_address"], "10.9.9.9")

    def test_pytorch_lightning_1_9_takes_slurm_first(self):
        for devices, nodes in ((2, 2), (1, 1)):
            doc = self.choose("lightning1", devices, nodes, **self.SLURM, **self.ELASTIC)
            self.assertEqual((doc["pl_version"], doc["environment"], doc["world_size"]),
                             ("1.9.5", "SLURMEnvironment", 4))
        self.assertEqual(self.choose("lightning1", **self.ELASTIC)["environment"], "TorchElasticEnvironment")
        kubeflow = dict(KUBERNETES_PORT="tcp://10.0.0.1:443", MASTER_ADDR="m", MASTER_PORT=1, WORLD_SIZE=2, RANK=1)
        self.assertEqual(self.choose("lightning1", **kubeflow)["environment"], "KubeflowEnvironment")
        self.assertEqual(self.choose("lightning", **kubeflow)["environment"], "LightningEnvironment")

    def test_pytorch_lightning_1_7_takes_slurm_when_it_manages_the_tasks(self):
        # SLURM_NTASKS (4) == devices * num_nodes
        doc = self.choose("lightning1", 2, 2, STANDIN_PL_VERSION="1.7.7", **self.SLURM)
        self.assertEqual((doc["environment"], doc["global_rank"], doc["main_address"]),
                         ("SLURMEnvironment", 3, "gpu07"))
        for devices, nodes in ((2, 1), (4, 2)):
            doc = self.choose("lightning1", devices, nodes, STANDIN_PL_VERSION="1.7.7", **self.SLURM)
            self.assertEqual(doc["environment"], "LightningEnvironment")
        doc = self.choose("lightning1", 1, 1, STANDIN_PL_VERSION="1.7.7", **self.SLURM, **self.ELASTIC)
        self.assertEqual(doc["environment"], "TorchElasticEnvironment")


if __name__ == "__main__":
    unittest.main(verbosity=2)
