"""distrun with MPI under Slurm: srun's PMIx (Open MPI) and PMI-2 (MPICH) plugins, and Open MPI's mpirun
inside an sbatch allocation, across the lab's virtual hosts. The workers are real MPI programs: mpi4py
(Debian builds it against Open MPI) and MPICH's libmpich through ctypes."""
import os
import re
import subprocess

from cluster_harness import DISTRUN, NODES, PYTHON, SLURM_CONF, ClusterCase, main, on_login_host

MPI4PY_HELLO = """
import os, socket
from mpi4py import MPI
c = MPI.COMM_WORLD
print(socket.gethostname(), c.Get_rank(), c.Get_size(), os.environ["DISTRUN_PROCESS_ID"], flush=True)
"""

# MPICH has no Python binding here: call libmpich directly. MPI_COMM_WORLD is the handle 0x44000000 in
# MPICH's ABI.
MPICH_HELLO = """
import ctypes, os, socket
lib = ctypes.CDLL("libmpich.so.12")
if lib.MPI_Init(None, None) != 0:
    raise SystemExit("MPI_Init failed")
rank, size = ctypes.c_int(), ctypes.c_int()
lib.MPI_Comm_rank(0x44000000, ctypes.byref(rank))
lib.MPI_Comm_size(0x44000000, ctypes.byref(size))
print(socket.gethostname(), rank.value, size.value, os.environ["DISTRUN_PROCESS_ID"], flush=True)
lib.MPI_Finalize()
"""


def srun_mpi_plugins():
    r = subprocess.run(on_login_host(["srun", "--mpi=list"]), env={"PATH": "/usr/bin:/bin", "SLURM_CONF": SLURM_CONF},
                       capture_output=True, text=True)
    return r.stdout + r.stderr


class SrunMpiPlugins(ClusterCase):
    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def detect_all(self, mpi, tasks=4):
        r = self.srun([f"--mpi={mpi}", "-N2", "--ntasks-per-node=2", "--output", self.path("%t.json"),
                       "--error", self.path("%t.err"), DISTRUN, "--detect", "--format", "json"])
        self.assertEqual(r.returncode, 0, r.stderr + "".join(self.read(f"{t}.err") for t in range(tasks)))
        return [self.read_json(f"{t}.json") for t in range(tasks)]

    def check_ranks(self, docs, method):
        for task, doc in enumerate(docs):
            with self.subTest(task=task):
                self.assertEqual(doc["method"], method)
                self.assertEqual(doc["launch_mode"], "per-task")
                self.assertEqual((doc["process_id"], doc["num_processes"]), (task, 4))
                self.assertEqual((doc["local_rank"], doc["local_world_size"]), (task % 2, 2))
                self.assertEqual((doc["node_rank"], doc["num_nodes"]), (task // 2, 2))
                self.assertEqual(doc["hosts"], NODES[:2])
                self.assertEqual(doc["coordinator_address"].rsplit(":", 1)[0], "node1")
                self.assertEqual(doc["warnings"], [])

    def run_mpi_workers(self, mpi, program):
        """distrun per task under srun --mpi=...; each worker initialises MPI and reports its world rank."""
        script = self.write("hello.py", program)
        r = self.srun([f"--mpi={mpi}", "-N2", "--ntasks-per-node=2", DISTRUN, "--tag-output", "off", "--",
                       PYTHON, script], timeout=120)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = sorted(r.stdout.split("\n")[:-1], key=lambda line: int(line.split()[1]))
        self.assertEqual([line.split() for line in lines],
                         [[NODES[rank // 2], str(rank), "4", str(rank)] for rank in range(4)], r.stdout)

    def test_pmix_step_is_read_by_the_slurm_method(self):
        # srun --mpi=pmix sets only PMIX_* beside the step's SLURM_*: the slurm method reads it.
        if "pmix" not in srun_mpi_plugins():
            self.skipTest("this Slurm has no mpi/pmix plugin")
        self.check_ranks(self.detect_all("pmix"), "slurm")

    def test_open_mpi_workers_under_pmix_see_distrun_ranks(self):
        if "pmix" not in srun_mpi_plugins():
            self.skipTest("this Slurm has no mpi/pmix plugin")
        self.run_mpi_workers("pmix", MPI4PY_HELLO)

    def test_pmi2_step_is_read_by_the_pmi_method(self):
        # srun --mpi=pmi2 sets PMI_RANK, PMI_SIZE, PMI_JOBID and PMI_FD: the pmi method, which checks
        # them against the step's SLURM_* variables.
        self.check_ranks(self.detect_all("pmi2"), "pmi")

    def test_mpich_workers_under_pmi2_keep_their_pmi_connection(self):
        # The worker reaches srun's PMI-2 server through the PMI_FD that distrun was given.
        self.run_mpi_workers("pmi2", MPICH_HELLO)


class MpirunInBatch(ClusterCase):
    def test_open_mpi_mpirun_across_hosts_in_an_sbatch_job(self):
        d = self.dir
        hello = os.path.join(d, "hello.py")
        with open(hello, "w") as f:
            f.write(MPI4PY_HELLO)
        # Open MPI's ranks do not say which host holds rank 0 across hosts; with mpirun's default by-slot
        # mapping it is the batch host, given to every rank with -x.
        job = self.sbatch(f"""#!/bin/bash
set -euo pipefail
export DISTRUN_COORDINATOR_ADDRESS=$(hostname)
mpirun=(mpirun --allow-run-as-root --oversubscribe -x DISTRUN_COORDINATOR_ADDRESS -np 4)
"${{mpirun[@]}}" /bin/sh -c 'exec {DISTRUN} --detect --format json > {d}/rank-$OMPI_COMM_WORLD_RANK.json'
"${{mpirun[@]}}" {DISTRUN} --tag-output off -- {PYTHON} {hello} > {d}/hello.out
echo batch-done
""", ["-N2", "--ntasks-per-node=2"])
        info = self.wait_job(job)
        log = self.read(f"slurm-{job}.out")
        self.assertEqual((info["JobState"], info["ExitCode"]), ("COMPLETED", "0:0"), log)
        for rank in range(4):
            with self.subTest(rank=rank):
                doc = self.read_json(f"rank-{rank}.json")
                self.assertEqual(doc["method"], "ompi")
                self.assertEqual(doc["launch_mode"], "per-task")
                self.assertEqual((doc["process_id"], doc["num_processes"]), (rank, 4))
                self.assertEqual((doc["local_rank"], doc["local_world_size"]), (rank % 2, 2))
                self.assertEqual(doc["num_nodes"], 2)
                self.assertEqual(doc["coordinator_address"].rsplit(":", 1)[0], "node1")
                self.assertEqual(doc["workers"][0]["env"]["MASTER_ADDR"], "node1")
                # Ranks on the batch host inherit the batch script's SLURM_* but are mpirun's, not alone.
                self.assertEqual(doc["warnings"], [])
        lines = sorted(self.read("hello.out").split("\n")[:-1], key=lambda line: int(line.split()[1]))
        self.assertEqual([line.split() for line in lines],
                         [[NODES[rank // 2], str(rank), "4", str(rank)] for rank in range(4)], log)

    def test_mpirun_ranks_find_rank_zeros_host_without_being_told(self):
        # Across hosts Open MPI's variables do not name rank 0's host: distrun's MPI probe (the `mpi` method)
        # asks the MPI library.
        help_text = subprocess.run([DISTRUN, "--help"], capture_output=True, text=True).stdout
        methods = re.search(r"--cluster-detection-method NAME\s+(.*?)\[env", help_text, re.S)
        if not methods or not re.search(r"\bmpi\b", methods.group(1)):
            self.skipTest("this distrun has no MPI probe (no `mpi` detection method in --help)")
        d = self.dir
        job = self.sbatch(f"""#!/bin/bash
set -euo pipefail
mpirun --allow-run-as-root --oversubscribe -np 4 \\
  /bin/sh -c 'exec {DISTRUN} --detect --format json > {d}/rank-$OMPI_COMM_WORLD_RANK.json'
""", ["-N2", "--ntasks-per-node=2"])
        info = self.wait_job(job)
        self.assertEqual((info["JobState"], info["ExitCode"]), ("COMPLETED", "0:0"), self.read(f"slurm-{job}.out"))
        for rank in range(4):
            with self.subTest(rank=rank):
                doc = self.read_json(f"rank-{rank}.json")
                self.assertEqual((doc["process_id"], doc["num_processes"]), (rank, 4))
                self.assertEqual(doc["workers"][0]["env"]["MASTER_ADDR"], "node1")
                self.assertEqual(doc["warnings"], [])


if __name__ == "__main__":
    main()
