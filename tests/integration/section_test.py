"""Sections from a worker's side (distrun.section, distrun_section_enter/exit): what node 0 shows of them,
nesting, the limits on names, and that outside a job a section does nothing."""
import json
import os
import subprocess
import unittest

from distrun_harness import DISTRUN
from launch_helpers import LaunchCase
from multi_node import free_port
from python_workers import LIBRARY, MODULE_DIR, cache_value, module_env, python_command

ROOT = os.path.dirname(MODULE_DIR)

# Runs each section a few times, then asks node 0 (over --metrics-address) what it saw, once the medians
# arrived, and prints it.
PY_WORKER = r"""
import json, os, re, sys, time, urllib.request
import distrun
url = sys.argv[1]
outer = distrun.section("outer")

@distrun.section("decorated")
def work():
    time.sleep(0.01)

for _ in range(5):
    with outer:
        with distrun.section("inner"):
            time.sleep(0.02)
        work()
names = ["n%d" % i for i in range(5)]
for name in names:
    with distrun.section(name):
        pass
try:
    distrun.section("one-too-many")
except distrun.InvalidArgumentError as e:
    print("ninth:", e)
try:
    distrun.section("")
except distrun.InvalidArgumentError as e:
    print("empty:", e)
deadline = time.time() + 30
while time.time() < deadline:
    job = json.load(urllib.request.urlopen(url + "job.json"))
    if job["ranks"] and len(job["ranks"][0]["sections"]) == 8:
        print(json.dumps(job["ranks"][0]["sections"], sort_keys=True))
        break
    time.sleep(0.1)
"""

C_WORKER = r"""
#include <distrun/client.h>
#include <stdio.h>
#include <time.h>
int main(void) {
  struct timespec ten_ms = {0, 10 * 1000 * 1000};
  printf("exit without enter: %d\n", distrun_section_exit());
  printf("empty name: %d\n", distrun_section_enter(""));
  for (int i = 0; i < 10; ++i) {
    if (distrun_section_enter("io") != 0 || nanosleep(&ten_ms, NULL) != 0 || distrun_section_exit() != 0) return 1;
  }
  return 0;
}
"""

# Waits until node 0 shows the worker's sections (job.json at the URL in argv[-1]) and prints them.
ASK_NODE_0 = """
import json, sys, time, urllib.request
deadline = time.time() + 30
while time.time() < deadline:
    ranks = json.load(urllib.request.urlopen(sys.argv[-1] + "job.json"))["ranks"]
    if ranks and ranks[0]["sections"]:
        print(json.dumps(ranks[0]["sections"]))
        break
    time.sleep(0.1)
"""


class Sections(LaunchCase):
    def job(self, *command):
        """Runs `command` as the one worker of a job whose node 0 serves --metrics-address; its URL is the
        command's last argument."""
        url = "http://127.0.0.1:%d/" % free_port()
        env = dict(self.env(**module_env()), PATH="/usr/bin:/bin")
        r = subprocess.run([DISTRUN, "--nproc-per-node", "1", "--metrics-address", url[7:-1], "--", *command, url],
                           env=env, capture_output=True, text=True, timeout=90)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r

    def test_python_sections_nest_decorate_and_reach_node_0(self):
        with open(self.path("worker.py"), "w") as f:
            f.write(PY_WORKER)
        r = self.job(*python_command(), self.path("worker.py"))
        self.assertRegex(r.stdout, r"ninth: distrun.section\('one-too-many'\): a worker has at most 8 section names")
        self.assertIn("empty: distrun.section needs a non-empty name, not ''", r.stdout)
        medians = json.loads(r.stdout.strip().splitlines()[-1])
        self.assertEqual(sorted(medians), sorted(["outer", "inner", "decorated", "n0", "n1", "n2", "n3", "n4"]))
        self.assertGreater(medians["inner"], 0.019)
        self.assertGreater(medians["decorated"], 0.009)
        self.assertGreater(medians["outer"], medians["inner"] + medians["decorated"] - 0.001)
        self.assertLess(medians["n0"], 0.01)

    def test_the_c_api_times_a_section_and_refuses_misuse(self):
        source = self.path("worker.c")
        with open(source, "w") as f:
            f.write(C_WORKER)
        program = self.path("worker")
        # A sanitizer build's library needs the sanitizer runtime first in the program.
        flags = ["-fsanitize=address,undefined"] if cache_value("DISTRUN_SANITIZE") == "ON" else []
        subprocess.run(["cc", *flags, "-o", program, source, "-I", os.path.join(ROOT, "runtime", "include"), LIBRARY,
                        "-Wl,-rpath," + os.path.dirname(LIBRARY)], check=True)
        # The C program, then (in the same worker, its slot's sections still on the board) what node 0 saw.
        r = self.job("sh", "-c", '"$0" && exec "$@"', program, *python_command(), "-c", ASK_NODE_0)
        self.assertIn("exit without enter: 1\n", r.stdout)  # DISTRUN_INVALID_ARGUMENT
        self.assertIn("empty name: 1\n", r.stdout)
        median = json.loads(r.stdout.strip().splitlines()[-1])["io"]
        self.assertGreater(median, 0.0095)
        self.assertLess(median, 0.5)
        # Outside a job: DISTRUN_FAILED_PRECONDITION, and nothing else happens.
        outside = subprocess.run([program], capture_output=True, text=True,
                                 env={"PATH": "/usr/bin:/bin", "ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "")})
        self.assertEqual(outside.returncode, 1)
        self.assertIn("exit without enter: 4\n", outside.stdout)

    def test_outside_a_job_a_python_section_does_nothing(self):
        code = ("import distrun\n"
                "with distrun.section('fwd'):\n    pass\n"
                "@distrun.section('step')\ndef f():\n    return 7\n"
                "print(f(), distrun.section('fwd').name)\n")
        r = subprocess.run([*python_command(), "-c", code], capture_output=True, text=True,
                           env=dict(module_env(), PATH="/usr/bin:/bin"), timeout=30)
        self.assertEqual((r.returncode, r.stdout), (0, "7 fwd\n"), r.stderr)


if __name__ == "__main__":
    unittest.main()
