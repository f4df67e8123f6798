"""man/distrun.1 documents what the binary does: the same options as --help, every option's variable,
every variable a worker gets, the verbs and their options, the version; and it renders without warnings."""
import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
MAN = os.path.join(ROOT, "man", "distrun.1")


def help_text():
    r = run(["--help"])
    assert r.returncode == 0, r.stderr
    return r.stdout


def help_options():
    return set(re.findall(r"^\s+(?:-[hHx],)?(--[a-z][a-z-]*)", help_text(), re.M))


def man_source_sections():
    """{section name: its source lines}."""
    sections, name = {}, ""
    with open(MAN) as f:
        for line in f.read().splitlines():
            m = re.match(r'\.SH\s+"?([^"]*)"?$', line)
            if m:
                name = m.group(1)
            sections.setdefault(name, []).append(line)
    return sections


def man_sections():
    """{section name: its rendered text}, with wide lines, no hyphenation and plain hyphens."""
    r = subprocess.run(["groff", "-man", "-Tutf8", "-rLL=300n", "-rHY=0", "-P-cbou", MAN],
                       capture_output=True, text=True, check=True)
    text = r.stdout.replace("\u2010", "-").replace("\u2212", "-")
    sections, name = {}, ""
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Z' ]+$", line):
            name = line
        sections.setdefault(name, []).append(line.strip())
    return {k: "\n".join(v) for k, v in sections.items()}


def man_options():
    # Option entries are the first word of the line after .TP in ACTIONS and OPTIONS:
    # `.BI \-\-name " ARG"` or `.B \-\-name`. (VERBS has entries of its own.)
    names = set()
    sections = man_source_sections()
    for section in ("ACTIONS", "OPTIONS"):
        lines = sections[section]
        for i, line in enumerate(lines[:-1]):
            if line.strip() == ".TP":
                m = re.match(r'\.B[IR]?\s+(?:\\-h\s*"?,\s*"?\s*)?(\\-\\-[a-z\\-]+)', lines[i + 1])
                if m:
                    names.add(m.group(1).replace("\\-", "-"))
    return names


def project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        return re.search(r"project\(distrun VERSION ([0-9.]+)", f.read()).group(1)


class Docs(unittest.TestCase):
    def test_help_and_man_list_the_same_options(self):
        self.assertEqual(help_options(), man_options())

    def test_man_page_renders_without_warnings(self):
        r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", MAN], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr, "")

    def test_every_option_variable_is_in_the_environment_section(self):
        variables = set(re.findall(r"\[env (DISTRUN_[A-Z_]+)", help_text()))
        self.assertGreater(len(variables), 20)
        documented = set(re.findall(r"\bDISTRUN_[A-Z_]+\b", man_sections()["ENVIRONMENT"]))
        self.assertEqual(variables - documented, set())

    def test_every_worker_variable_is_in_the_worker_environment_section(self):
        # Per-node planning with device narrowing, then with --device-binding none: between them every
        # variable distrun can set for a worker.
        section = man_sections()["WORKER ENVIRONMENT"]
        names = set()
        # In a Slurm job, the task variables a per-node worker sees as the plan's
        # (launcher/plan/task_variables.h).
        slurm = {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_NPROCS": "1",
                 "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NUM_NODES": "1", "SLURM_STEP_TASKS_PER_NODE": "1",
                 "SLURM_GTIDS": "0", "SLURM_LOCALID": "0", "SLURM_NODEID": "0"}
        for extra, env in (([], {}), (["--device-binding", "none"], {}),
                           (["--cluster-detection-method", "local"], slurm)):
            r = run(["--dry-run", "--format", "json", "--nproc-per-node", "2", *extra, "--", "true"],
                    env={"CUDA_VISIBLE_DEVICES": "0,1", **env})
            self.assertEqual(r.returncode, 0, r.stderr)
            for worker in json.loads(r.stdout)["workers"]:
                names |= set(worker["env"])
        self.assertIn("JAX_LOCAL_DEVICE_IDS", names)
        self.assertIn("CUDA_VISIBLE_DEVICES", names)
        self.assertIn("SLURM_NTASKS_PER_NODE", names)
        missing = {n for n in names if not re.search(r"\b" + re.escape(n) + r"\b", section)}
        self.assertEqual(missing, set())

    def test_synopsis_lists_every_verb_help_lists(self):
        usage = help_text().split("Options:")[0]
        verbs = set(re.findall(r"^  distrun ([a-z]+)\b", usage, re.M))
        self.assertGreaterEqual(verbs, {"kv", "barrier", "progress", "stacks", "status", "check"})
        synopsis = man_sections()["SYNOPSIS"]
        for verb in verbs:
            self.assertRegex(synopsis, r"\bdistrun " + verb + r"\b", verb)

    def test_verbs_are_documented(self):
        section = man_sections()["VERBS"]
        r = run(["kv", "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        usage = r.stdout.split("distrun barrier")[0]
        operations = re.findall(r"(?:distrun kv |\| )([a-z-]+)", usage)
        self.assertGreaterEqual(len(operations), 8)
        for op in operations:
            self.assertRegex(section, r"(?m)^kv " + re.escape(op) + r"\b")
        self.assertRegex(section, r"(?m)^barrier NAME \[--timeout S\]")
        self.assertRegex(section, r"(?m)^kv get KEY \[--timeout S\]")
        r = run(["check", "--help"])
        self.assertEqual(r.returncode, 0, r.stderr)
        for option in re.findall(r"--[a-z-]+", r.stdout.split("CHECK-OPTIONS:", 1)[1]):
            self.assertIn(option, section)
        # Every exit code the verbs' usage names is in EXIT STATUS.
        exits = man_sections()["EXIT STATUS"]
        for code in re.findall(r"(\d+) (?:done|no such key|usage error|the runtime|a wait)", r.stdout + run(["kv", "--help"]).stdout):
            self.assertIn(code, exits)

    def test_version_is_the_projects(self):
        r = run(["--version"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(r.stdout.startswith(f"distrun {project_version()} (features: "), r.stdout)
        with open(MAN) as f:
            th = f.readline()
        self.assertIn(f'"distrun {project_version()}"', th)


if __name__ == "__main__":
    unittest.main(verbosity=2)
