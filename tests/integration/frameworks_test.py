"""Frameworks that find their world themselves agree with distrun's plan, in real launches: JAX's
`jax.distributed.initialize()` with no arguments (three API generations of the stand-in JAX under
tests/frameworks, whose detection path and coordination service mirror the real ones), Keras 3's
`keras.distribution.initialize()`, and mpi4py; locally, under Open MPI's mpirun and MPICH's mpiexec per node
and per task, and across an elastic job's epochs. The Slurm lab's per-node and per-task steps are in
tests/cluster/frameworks_test.py."""
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402
from launch_helpers import PYTHON, LaunchCase  # noqa: E402
from mpi_test import MPICH, OPEN_MPI, MpiCase  # noqa: E402
from multi_node import MultiNodeCase, free_port  # noqa: E402

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STANDINS = os.path.join(REPO, "tests", "frameworks")
PROBE = os.path.join(STANDINS, "probe.py")
GENERATIONS = ("0.4.14", "0.4.31", "0.11.2")


def documents(text):
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


class FrameworkCase(LaunchCase):
    def launch(self, distrun_args, command, jax="0.11.2", timeout=60, **env):
        """distrun ARGS -- COMMAND with the stand-ins on PYTHONPATH; returns (code, documents, stderr)."""
        p = self.popen([*distrun_args, "--tag-output", "off", "--", *command],
                       env=self.env(PYTHONPATH=STANDINS, STANDIN_JAX_VERSION=jax, HOME=self.dir, **env))
        out, err = p.communicate(timeout=timeout)
        return p.returncode, documents(out), err

    def assert_world(self, docs, size, cluster="DistrunCluster", local_device_ids=None):
        """Every worker joined one world of `size` at one coordinator, with the rank distrun gave it."""
        self.assertEqual(len(docs), size, docs)
        for d in docs:
            self.assertNotIn("error", d, d)
            self.assertEqual(d["num_processes"], size, d)
            self.assertEqual(str(d["process_id"]), d["distrun_rank"], d)
            self.assertEqual(d["all_ids"], list(range(size)), d)
            if cluster is not None:
                self.assertEqual(d["cluster_env"], cluster, d)
        self.assertEqual(sorted(d["process_id"] for d in docs), list(range(size)))
        self.assertEqual(len({d["coordinator"] for d in docs}), 1, docs)
        if local_device_ids is not None:
            self.assertEqual({d["process_id"]: d["local_device_ids"] for d in docs}, local_device_ids)


class JaxWithoutArguments(FrameworkCase):
    def test_a_local_launch_in_every_api_generation(self):
        for generation in GENERATIONS:
            with self.subTest(jax=generation):
                code, docs, err = self.launch(["--nproc-per-node", "3"], [PYTHON, PROBE, "jax"], jax=generation)
                self.assertEqual(code, 0, err)
                # distrun narrowed nothing here (no GPU): JAX keeps every local device.
                self.assert_world(docs, 3, local_device_ids={0: None, 1: None, 2: None})
                self.assertTrue(all(d["jax_version"] == generation for d in docs))

    def test_detection_by_name_selects_distruns_cluster(self):
        for generation in ("0.4.31", "0.11.2"):
            with self.subTest(jax=generation):
                code, docs, err = self.launch(["--nproc-per-node", "2"], [PYTHON, PROBE, "jax-named"],
                                              jax=generation)
                self.assertEqual(code, 0, err)
                self.assert_world(docs, 2)

    def test_explicit_arguments_keep_winning(self):
        # A one-process world of its own, on a port of the script's choosing, whatever distrun planned.
        script = ("import json, socket, jax\n"
                  "s = socket.socket(); s.bind(('127.0.0.1', 0)); port = s.getsockname()[1]; s.close()\n"
                  "jax.distributed.initialize('127.0.0.1:%d' % port, 1, 0)\n"
                  "from jax._src.distributed import global_state as g\n"
                  "print(json.dumps({'coordinator': g.coordinator_address, 'port': port,\n"
                  "                  'num_processes': g.num_processes, 'process_id': g.process_id}))\n"
                  "jax.distributed.shutdown()\n")
        code, docs, err = self.launch(["--nproc-per-node", "1"], [PYTHON, "-c", script])
        self.assertEqual(code, 0, err)
        self.assertEqual(docs[0]["coordinator"], "127.0.0.1:%d" % docs[0]["port"])
        self.assertEqual((docs[0]["num_processes"], docs[0]["process_id"]), (1, 0))

    def test_local_devices_follow_distruns_binding(self):
        # Two GPUs named to distrun: each worker sees its own (none to name to JAX) or, with --device-binding
        # none, both, its own named in JAX_LOCAL_DEVICE_IDS, which the newest JAX reads itself and older ones
        # get from distrun's cluster.
        for generation in ("0.4.14", "0.11.2"):
            with self.subTest(jax=generation):
                code, docs, err = self.launch(["--nproc-per-node", "2"], [PYTHON, PROBE, "jax"], jax=generation,
                                              CUDA_VISIBLE_DEVICES="0,1")
                self.assertEqual(code, 0, err)
                self.assert_world(docs, 2, local_device_ids={0: None, 1: None})
                code, docs, err = self.launch(["--nproc-per-node", "2", "--device-binding", "none"],
                                              [PYTHON, PROBE, "jax"], jax=generation, CUDA_VISIBLE_DEVICES="0,1")
                self.assertEqual(code, 0, err)
                self.assert_world(docs, 2, local_device_ids={0: [0], 1: [1]})

    def test_an_interpreter_without_sitecustomize_imports_distrun_jax(self):
        # python -I ignores PYTHONPATH and sitecustomize: the script finds the packages itself.
        prelude = f"import sys; sys.path[:0] = [{STANDINS!r}, {os.path.join(REPO, 'python')!r}]\n"
        run_probe = f"sys.argv = ['probe', 'jax']; exec(open({PROBE!r}).read())\n"
        code, docs, err = self.launch(["--nproc-per-node", "2"],
                                      [PYTHON, "-I", "-c", prelude + "import distrun.jax\n" + run_probe])
        self.assertEqual(code, 0, err)
        self.assert_world(docs, 2)
        # Without it, JAX finds nothing to read the count from.
        code, docs, err = self.launch(["--nproc-per-node", "2"], [PYTHON, "-I", "-c", prelude + run_probe])
        self.assertNotEqual(code, 0)
        self.assertIn("Number of processes must be defined", docs[0]["error"])

    def test_a_worker_that_never_imports_jax_loads_nothing_of_it(self):
        code, docs, err = self.launch(["--nproc-per-node", "1"], [
            PYTHON, "-c", "import sys, json; print(json.dumps(sorted(m for m in sys.modules if 'jax' in m)))"])
        self.assertEqual(code, 0, err)
        self.assertEqual(docs, [])  # the line is "[]", not a document
        self.assertEqual(err, "")


class OtherLaunchers(FrameworkCase):
    def test_kubernetes_pod(self):
        # An Indexed Job's pod (one pod here); JAX's Kubernetes cluster would ask the API server for the pod.
        code, docs, err = self.launch(["--nproc-per-node", "2"], [PYTHON, PROBE, "jax"], JOB_COMPLETION_INDEX="0",
                                      DISTRUN_NUM_NODES="1", KUBERNETES_SERVICE_HOST="10.0.0.1")
        self.assertEqual(code, 0, err)
        self.assert_world(docs, 2)

    def test_torchelastic_style_tasks(self):
        # Two distruns started by something torchrun-like, each with one task's variables (per-task).
        common = dict(TORCHELASTIC_RUN_ID="frameworks", WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", GROUP_RANK="0",
                      GROUP_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        procs = [self.popen(["--tag-output", "off", "--", PYTHON, PROBE, "jax"],
                            env=self.env(PYTHONPATH=STANDINS, HOME=self.dir, RANK=str(i), LOCAL_RANK=str(i), **common))
                 for i in range(2)]
        docs = []
        for p in procs:
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            docs += documents(out)
        self.assert_world(docs, 2)

    def test_tpu_vm_one_worker_per_host_keeps_jaxs_own_detection(self):
        # JAX's TPU clusters find the same world on a TPU VM with one process per host (and set TPU
        # specifics): distrun's steps aside. With two workers per host, distrun's plan is the world.
        tpu = dict(STANDIN_TPU_VM="1", TPU_WORKER_HOSTNAMES="localhost", TPU_WORKER_ID="0",
                   TPU_SKIP_MDS_QUERY="true")
        code, docs, err = self.launch([], [PYTHON, PROBE, "jax"], **tpu)
        self.assertEqual(code, 0, err)
        self.assert_world(docs, 1, cluster="GkeTpuCluster")
        code, docs, err = self.launch(["--nproc-per-node", "2"], [PYTHON, PROBE, "jax"], **tpu)
        self.assertEqual(code, 0, err)
        self.assert_world(docs, 2)


class KerasWithoutArguments(FrameworkCase):
    def test_keras_joins_the_same_world(self):
        code, docs, err = self.launch(["--nproc-per-node", "3"], [PYTHON, PROBE, "keras"], KERAS_BACKEND="jax")
        self.assertEqual(code, 0, err)
        # Keras passes JAX the coordinator, count and id from its own variables; JAX's detection then only
        # looks for local devices, through distrun's cluster.
        self.assert_world(docs, 3, cluster=None)


class UnderMpiLaunchers(MpiCase, FrameworkCase):
    def run_under(self, launcher, n, distrun_args, mode="jax", **env):
        rc, out, err = self.launch([*self.launcher(launcher, n), DISTRUN, *distrun_args, "--tag-output", "off",
                                    "--", PYTHON, PROBE, mode],
                                   PYTHONPATH=STANDINS, STANDIN_JAX_VERSION="0.11.2", **env)
        return rc, documents(out), out + err

    def test_one_distrun_per_node_under_open_mpi(self):
        # mpirun -np 1 distrun --nproc-per-node 3: JAX's Open MPI detection would make three one-process
        # jobs; the workers have no Open MPI variables left, and distrun's cluster comes first.
        rc, docs, said = self.run_under(OPEN_MPI, 1, ["--nproc-per-node", "3"])
        self.assertEqual(rc, 0, said)
        self.assert_world(docs, 3)

    def test_one_distrun_per_node_under_mpich(self):
        rc, docs, said = self.run_under(MPICH, 1, ["--nproc-per-node", "2"])
        self.assertEqual(rc, 0, said)
        self.assert_world(docs, 2)

    def test_one_distrun_per_task_under_open_mpi(self):
        # Each worker is its MPI task: JAX's Open MPI cluster would be right too; distrun's says the same.
        rc, docs, said = self.run_under(OPEN_MPI, 3, [])
        self.assertEqual(rc, 0, said)
        self.assert_world(docs, 3)

    def test_one_distrun_per_task_under_mpich(self):
        rc, docs, said = self.run_under(MPICH, 2, [])
        self.assertEqual(rc, 0, said)
        self.assert_world(docs, 2)

    def test_mpi4py_in_a_per_node_worker_stops_naming_the_fix(self):
        # MPI's world in such a worker is the worker alone: it must not pass for the job's.
        rc, out, err = self.launch([*self.launcher(OPEN_MPI, 1), DISTRUN, "--nproc-per-node", "2", "--tag-output",
                                    "off", "--", PYTHON, "-c", "from mpi4py import MPI; print('joined')"])
        self.assertNotEqual(rc, 0, out + err)
        self.assertNotIn("joined", out)
        self.assertIn("distrun: mpi4py's world here is 1 process(es)", err)
        self.assertIn("start one distrun per worker", err)

    def test_a_native_mpi_program_as_several_workers_per_distrun_is_refused_at_start(self):
        # ompi_info links Open MPI's libmpi.so.40: as two workers of one distrun, each would be an MPI world.
        rc, out, err = self.launch([DISTRUN, "--nproc-per-node", "2", "--", "ompi_info", "--version"])
        self.assertEqual(rc, 2, out + err)
        self.assertEqual(out, "")
        self.assertEqual(err, "distrun: error: ompi_info is an MPI program (it needs libmpi.so.40), but the 2 "
                              "worker(s) of this distrun are not processes of an MPI launcher's job, so MPI_Init "
                              "would make each of them a world of one process; start one distrun per MPI process "
                              "(mpirun -np 2 distrun -- ompi_info, srun --ntasks-per-node=G distrun -- ompi_info) "
                              "or one worker per distrun (--nproc-per-node 1)\n")
        # One distrun per MPI process: each worker is its MPI process.
        rc, out, err = self.launch([*self.launcher(OPEN_MPI, 2), DISTRUN, "--tag-output", "off", "--", "ompi_info",
                                    "--version"])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(out.count("Open MPI v"), 2, out)

    def test_horovod_in_a_per_node_worker_stops_naming_the_fix(self):
        # Horovod built with MPI takes MPI's world, never RANK and WORLD_SIZE (the stand-in under
        # tests/frameworks initialises Open MPI as Horovod's core does).
        program = "import horovod.torch as hvd; hvd.init(); print('horovod', hvd.rank(), hvd.size(), flush=True)"
        rc, out, err = self.launch([*self.launcher(OPEN_MPI, 1), DISTRUN, "--nproc-per-node", "2", "--tag-output",
                                    "off", "--", PYTHON, "-c", program], PYTHONPATH=STANDINS)
        self.assertNotEqual(rc, 0, out + err)
        self.assertNotIn("horovod", out)
        self.assertIn("RuntimeError: distrun: Horovod's world here is 1 process(es) (this one rank 0) but "
                      "distrun's job has 2 workers", err)
        # One distrun per MPI rank: Horovod's world is the job's.
        rc, out, err = self.launch([*self.launcher(OPEN_MPI, 2), DISTRUN, "--tag-output", "off", "--", PYTHON,
                                    "-c", program], PYTHONPATH=STANDINS)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(sorted(out.splitlines()), ["horovod 0 2", "horovod 1 2"])


class AcrossEpochs(MultiNodeCase):
    """Each worker initialises JAX and records its world, then waits in epoch 0 until the job changes."""

    SCRIPT = (f'{PYTHON} {PROBE} jax > $OUT/jax-$DISTRUN_EPOCH-$DISTRUN_PROCESS_ID.json || exit 1; '
              'echo up > $OUT/up-$DISTRUN_EPOCH-$DISTRUN_PROCESS_ID; if [ $DISTRUN_EPOCH = 0 ]; then sleep 60; fi')
    ENV = {"PYTHONPATH": STANDINS, "STANDIN_JAX_VERSION": "0.11.2", "DISTRUN_TOKEN": "frameworks-epochs"}

    def worlds(self):
        epochs = {}
        for name in os.listdir(self.dir):
            if name.startswith("jax-"):
                with open(self.path(name)) as f:
                    epochs.setdefault(int(name.split("-")[1]), []).extend(documents(f.read()))
        return epochs

    def assert_epochs(self, results, sizes):
        self.assertEqual([r[0] for r in results], [0] * len(results), [r[2] for r in results])
        epochs = self.worlds()
        self.assertEqual(sorted(epochs), list(range(len(sizes))))
        for epoch, size in enumerate(sizes):
            FrameworkCase.assert_world(self, epochs[epoch], size)
        # JAX's service gets a fresh port every epoch.
        self.assertEqual(len({epochs[e][0]["coordinator"] for e in epochs}), len(sizes))
        return epochs

    def test_after_a_resize(self):
        # Nodes of 1, 2 and 1 workers; node 1 is lost: two nodes and two workers in epoch 1.
        nodes = self.start_nodes([1, 2, 1], self.SCRIPT, "--nnodes", "2:3", env=self.ENV)
        self.wait_for_files("up-0-0", "up-0-1", "up-0-2", "up-0-3", timeout=60)
        nodes[1].kill()
        self.assert_epochs(self.finish([nodes[0], nodes[2]]), [4, 2])

    def test_after_a_spare_takes_a_seat(self):
        nodes = self.start_nodes([1, 1, 1], self.SCRIPT, "--nnodes", "2:3", "--elastic-policy", "spares",
                                 env=self.ENV)
        self.wait_for_files("up-0-0", "up-0-1", timeout=60)
        nodes[1].kill()
        self.assert_epochs(self.finish([nodes[0], nodes[2]]), [2, 2])

    def test_after_an_arrival(self):
        common = ["--nnodes", "2:3", "--scale-up", "now", "--run-id", "frameworks-arrival"]
        nodes = self.start_nodes([1, 1], self.SCRIPT, *common, env=self.ENV)
        self.wait_for_files("up-0-0", "up-0-1", timeout=60)
        late = self.popen(["--join", f"127.0.0.1:{self.port}", "--nproc-per-node", "1", "--grace-period", "5",
                           *common, "--", "sh", "-c", self.SCRIPT],
                          env=self.env(OUT=self.dir, NODE="2", **self.ENV))
        self.assert_epochs(self.finish(nodes + [late]), [2, 3])


if __name__ == "__main__":
    unittest.main(verbosity=2)
