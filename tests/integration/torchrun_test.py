"""torchrun's command lines, with the word `torchrun` replaced by `distrun`: the same commands run under the
real torchrun (Debian's torch 1.13, bench/torchrun_py311.py mends it for Python 3.11) and under distrun, and
every worker reports the same world (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, ...), its
arguments and how it was run. Single node, --standalone, static multi-node on loopback (one distrun per node,
the same command but --node_rank), -m, --no_python, PET_* variables, real gloo all-reduce; `python -m
distrun`. The intended differences (README "From torchrun") are checked too: the failing worker's exit
code. The lab's hosts run the multi-node forms in tests/cluster/torchrun_hosts_test.py."""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import unittest
import uuid

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import DISTRUN  # noqa: E402
from launch_helpers import describe, processes_with, wait_for  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PYTHON = "/usr/bin/python3"  # Debian's: python3-torch is installed for it
TORCHRUN = [PYTHON, os.path.join(REPO, "bench", "torchrun_py311.py")]
# torch's worker contract, as torchrun sets it; MASTER_PORT is compared where the command names it.
# OMP_NUM_THREADS: torchrun sets it (to 1) only where a node has several workers, distrun for one as well.
CONTRACT = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
            "ROLE_WORLD_SIZE", "ROLE_NAME", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS"]

WORKER = r"""
import json, os, sys
names = %r
# One write per line: torchrun leaves its workers' output untagged, and print's newline would be a second one.
sys.stdout.write("REPORT " + json.dumps({"env": {n: os.environ.get(n) for n in names + ["MASTER_ADDR", "MASTER_PORT"]},
    "argv": sys.argv[1:], "python": sys.executable, "unbuffered": sys.stdout.write_through,
    "module": __spec__ is not None and __spec__.name or None}) + "\n")
sys.stdout.flush()
""" % (CONTRACT,)

ALLREDUCE = r"""
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
import sys
sys.stdout.write("REPORT {\"sum\": %d, \"rank\": %d}\n" % (int(t.item()), dist.get_rank()))
sys.stdout.flush()
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reports(text):
    return [json.loads(line.split("REPORT ", 1)[1]) for line in text.splitlines() if "REPORT " in line]


class SameCommand(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="distrun-torchrun-")
        self.marker = f"DISTRUN_TEST_MARKER={uuid.uuid4().hex}"
        with open(os.path.join(self.dir, "worker.py"), "w") as f:
            f.write(WORKER)
        os.makedirs(os.path.join(self.dir, "pkg"))
        with open(os.path.join(self.dir, "pkg", "__init__.py"), "w") as f:
            f.write("")
        with open(os.path.join(self.dir, "pkg", "report.py"), "w") as f:
            f.write(WORKER)
        with open(os.path.join(self.dir, "allreduce.py"), "w") as f:
            f.write(ALLREDUCE)

    def tearDown(self):
        wait_for(lambda: not processes_with(self.marker), timeout=10)
        left = processes_with(self.marker)
        for pid in left:
            os.kill(pid, signal.SIGKILL)  # carries this test's marker: a process this test started
        subprocess.run(["rm", "-rf", self.dir])
        self.assertEqual(left, [], "processes outlived the launcher:\n" + "\n".join(map(describe, left)))

    def env(self, **extra):
        name, value = self.marker.split("=", 1)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": self.dir, name: value, "LANG": "C.UTF-8",
               "TMPDIR": self.dir}
        env.update(extra)
        return env

    def start(self, launcher, args, **env):
        return subprocess.Popen(launcher + args, cwd=self.dir, env=self.env(**env), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def launch(self, launcher, args, nodes=1, **env):
        """The command on `nodes` launchers (each with its --node_rank when several), their reports by rank."""
        procs = []
        for node in range(nodes):
            node_args = [a.replace("{node}", str(node)) for a in args]
            procs.append(self.start(launcher, node_args, **env))
        got, outs = [], ""
        for p in procs:
            out, err = p.communicate(timeout=180)
            outs += out + err
            self.assertEqual(p.returncode, 0, f"{launcher[-1]} {' '.join(args)}:\n{out}{err}")
            got += reports(out)
        return sorted(got, key=lambda r: int(r["env"]["RANK"]) if "env" in r else r["rank"]), outs

    def same_world(self, args, nodes=1, master=("MASTER_ADDR",), **env):
        """The command under torchrun, then under distrun: the same world, rank by rank (and `master`: the
        store's address where the command decides it)."""
        torchrun, t_out = self.launch(TORCHRUN, args, nodes, **env)
        distrun, d_out = self.launch([DISTRUN], args, nodes, **env)
        self.assertEqual(len(distrun), len(torchrun), t_out + d_out)
        self.assertTrue(distrun, d_out)
        for t, d in zip(torchrun, distrun):
            names = CONTRACT + list(master)
            self.assertEqual({n: d["env"][n] for n in names}, {n: t["env"][n] for n in names}, d_out)
            for key in ("argv", "unbuffered", "module"):
                self.assertEqual(d[key], t[key], key)
        return torchrun, distrun

    def test_single_node(self):
        _, distrun = self.same_world(["--nproc_per_node=2", "worker.py", "--lr", "0.1", "--nproc_per_node", "9"])
        self.assertEqual([d["argv"] for d in distrun], [["--lr", "0.1", "--nproc_per_node", "9"]] * 2)
        self.assertTrue(all(d["unbuffered"] for d in distrun))

    def test_standalone(self):
        # torchrun's --standalone store is on localhost, distrun's on 127.0.0.1.
        self.same_world(["--standalone", "--nnodes=1", "--nproc_per_node=3", "worker.py"], master=())

    def test_static_multi_node_with_the_masters_address(self):
        port = free_port()
        self.same_world(["--nnodes=2", "--nproc_per_node=2", "--node_rank={node}", "--master_addr=127.0.0.1",
                         f"--master_port={port}", "worker.py", "x"], nodes=2, master=("MASTER_ADDR", "MASTER_PORT"))

    def test_c10d_the_same_command_for_every_node(self):
        # One machine, three launchers, the endpoint on loopback: the first to bind it serves the job, the
        # others take their ranks as they come. MASTER_ADDR: torchrun's is node 0's host name, distrun's the
        # endpoint's host (its store is there).
        port = free_port()
        _, distrun = self.same_world(["--nnodes=3", "--nproc_per_node=1", "--rdzv_backend=c10d",
                                      f"--rdzv_endpoint=127.0.0.1:{port}", "--rdzv_id=job7", "worker.py"],
                                     nodes=3, master=())
        self.assertEqual({d["env"]["MASTER_ADDR"] for d in distrun}, {"127.0.0.1"})
        self.assertEqual({d["env"]["MASTER_PORT"] for d in distrun}, {str(port)})

    def test_a_module(self):
        self.same_world(["--nproc_per_node=2", "-m", "pkg.report", "--arg"])

    def test_no_python_runs_the_command_itself(self):
        self.same_world(["--nproc_per_node=2", "--no_python", PYTHON, "worker.py", "y"])

    def test_pet_variables(self):
        self.same_world(["worker.py"], PET_NPROC_PER_NODE="2", PET_MAX_RESTARTS="2")

    def test_gloo_all_reduce(self):
        _, distrun = self.same_world_of("allreduce.py")
        self.assertEqual(sorted(r["rank"] for r in distrun), [0, 1, 2])
        self.assertEqual({r["sum"] for r in distrun}, {6})

    def same_world_of(self, script):
        torchrun, t_out = self.launch(TORCHRUN, ["--nproc_per_node=3", script])
        distrun, d_out = self.launch([DISTRUN], ["--nproc_per_node=3", script])
        self.assertEqual(sorted(map(json.dumps, torchrun)), sorted(map(json.dumps, distrun)), t_out + d_out)
        return torchrun, distrun

    def test_the_exit_code_is_the_failing_workers_where_torchrun_says_1(self):
        with open(os.path.join(self.dir, "fail.py"), "w") as f:
            f.write("import os, sys, time\nif os.environ['RANK'] == '1': sys.exit(7)\ntime.sleep(60)\n")
        for launcher, code in ((TORCHRUN, 1), ([DISTRUN], 7)):
            p = self.start(launcher, ["--nproc_per_node=2", "fail.py"])
            out, err = p.communicate(timeout=120)
            self.assertEqual(p.returncode, code, f"{launcher[-1]}: {out}{err}")

    def test_python_dash_m_distrun_runs_distrun(self):
        # Where distrun's bin/ is not on PATH: the module finds the program (here, by PATH's last resort).
        p = subprocess.run([PYTHON, "-m", "distrun", "--nproc_per_node=2", "worker.py", "z"], cwd=self.dir,
                           env=self.env(PYTHONPATH=os.path.join(REPO, "python"),
                                        PATH="/usr/bin:/bin:" + os.path.dirname(DISTRUN)),
                           capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(sorted(r["env"]["RANK"] for r in reports(p.stdout)), ["0", "1"], p.stdout)

    def output_of(self, *args, **env):
        with open(os.path.join(self.dir, "talk.py"), "w") as f:
            f.write("import os, sys\nr = os.environ['RANK']\nprint('out of ' + r)\n"
                    "print('err of ' + r, file=sys.stderr)\n")
        p = subprocess.run([DISTRUN, "--nproc_per_node=2", "--tag-output=off", *args, "talk.py"], cwd=self.dir,
                           env=self.env(**env), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p

    def files_in(self, directory):
        out = {}
        for name in sorted(os.listdir(directory)):
            if name.startswith("rank-"):
                with open(os.path.join(directory, name)) as f:
                    out[name] = f.read()
        return out

    def test_redirects_and_tee_choose_the_streams_of_the_files_and_the_console(self):
        logs = os.path.join(self.dir, "logs")
        p = self.output_of("-r", "1", f"--log_dir={logs}")  # stdout to the files only
        self.assertEqual(p.stdout, "")
        self.assertEqual(sorted(l for l in p.stderr.splitlines() if " of " in l), ["err of 0", "err of 1"])
        self.assertEqual(self.files_in(logs), {"rank-0.out": "out of 0\n", "rank-1.out": "out of 1\n"})
        logs = os.path.join(self.dir, "tee")
        p = self.output_of("-t2", "--log-dir", logs)  # stderr to the files as well
        self.assertEqual(sorted(p.stdout.splitlines()), ["out of 0", "out of 1"])
        self.assertEqual(self.files_in(logs), {"rank-0.err": "err of 0\n", "rank-1.err": "err of 1\n"})
        p = self.output_of("--redirects=0:3")  # local rank 0's both, and no --log_dir: a new directory
        self.assertEqual(p.stdout, "out of 1\n")
        made = [l.split(" are in ", 1)[1] for l in p.stderr.splitlines() if "log files (--redirects, --tee)" in l]
        self.assertEqual(len(made), 1, p.stderr)
        self.assertTrue(made[0].startswith(os.path.join(self.dir, "distrun-logs-")), made)
        self.assertEqual(self.files_in(made[0]), {"rank-0.err": "err of 0\n", "rank-0.out": "out of 0\n"})

    def test_local_ranks_filter_shows_those_local_ranks(self):
        p = self.output_of("--local_ranks_filter=1")
        self.assertEqual(p.stdout, "out of 1\n")

    def test_dry_run_shows_the_python_command(self):
        p = subprocess.run([DISTRUN, "--dry-run", "--nproc_per_node=1", "worker.py", "a"], cwd=self.dir,
                           env=self.env(VIRTUAL_ENV="/nonexistent", PYTHON_EXEC="/opt/python3.12"),
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("command           /opt/python3.12 -u worker.py a\n", p.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
