"""completion/distrun.bash, sourced into a plain bash and asked as bash would ask it (COMP_WORDS and
COMP_CWORD set, then _distrun): it offers every option of `distrun --help` and no other, the values that
--help lists for each option, the verbs, and leaves the worker command's words alone."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "completion", "distrun.bash")


def complete(*words):
    """COMPREPLY for the command line `words`, the last word being the one completed."""
    quoted = " ".join("'" + w.replace("'", "'\\''") + "'" for w in words)
    program = (f'source "$1" || exit 9\nCOMP_WORDS=({quoted})\nCOMP_CWORD=$((${{#COMP_WORDS[@]}} - 1))\n'
               'COMP_LINE="${COMP_WORDS[*]}"\nCOMP_POINT=${#COMP_LINE}\n_distrun\n'
               'printf "%s\\n" "${COMPREPLY[@]}"\n')
    r = subprocess.run(["/bin/bash", "--norc", "--noprofile", "-c", program, "bash", SCRIPT],
                       capture_output=True, text=True, timeout=30,
                       env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/nonexistent"})
    assert r.returncode == 0, r.stderr
    assert r.stderr == "", r.stderr
    return [line for line in r.stdout.splitlines() if line]


def help_text():
    r = run(["--help"])
    assert r.returncode == 0, r.stderr
    return r.stdout


def help_entries():
    """{option: (value name, description)} from `distrun --help` (descriptions may start on the next line)."""
    entries = {}
    lines = help_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^\s+(?:-[a-zA-Z],)?(--[a-z][a-z-]*)(?: (\S+))?\s*(.*)$", line)
        if not m:
            continue
        description = m.group(3)
        if not description and i + 1 < len(lines):
            description = lines[i + 1].strip()
        entries[m.group(1)] = (m.group(2), description)
        short = re.match(r"^\s+(-[a-zA-Z]),", line)
        if short:
            entries[short.group(1)] = (None, description)
    return entries


def kv_operations():
    """The operations of `distrun kv --help`: "usage: distrun kv set KEY VALUE | get KEY ... | ls [PREFIX]"."""
    r = run(["kv", "--help"])
    assert r.returncode == 0, r.stderr
    usage = r.stdout.split("distrun barrier")[0]
    return re.findall(r"(?:distrun kv |\| )([a-z-]+)", usage)


def check_options():
    """The options `distrun check --help` lists after CHECK-OPTIONS: (those of its NCCL worker)."""
    r = run(["check", "--help"])
    assert r.returncode == 0, r.stderr
    return re.findall(r"--[a-z-]+", r.stdout.split("CHECK-OPTIONS:", 1)[1])


class Completion(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.entries = help_entries()

    def test_script_is_valid_bash(self):
        r = subprocess.run(["/bin/bash", "-n", SCRIPT], capture_output=True, text=True)
        self.assertEqual((r.returncode, r.stderr), (0, ""))

    def test_offers_exactly_the_options_of_help(self):
        offered = set(complete("distrun", "-"))
        offered.discard("--")
        self.assertEqual(offered, set(self.entries))
        self.assertEqual(set(complete("distrun", "--for")), {"--format", "--forward-signals", "--forward-env"})

    def test_choices_listed_in_help_are_completed(self):
        # A value name such as text|json|yaml|env lists the choices; placeholders (N) are in capitals.
        checked = 0
        for option, (value_name, _) in self.entries.items():
            if not value_name or "|" not in value_name:
                continue
            choices = {c for c in value_name.split("|") if not c.isupper()}
            with self.subTest(option=option):
                self.assertEqual(set(complete("distrun", option, "")), choices)
                checked += 1
        self.assertGreaterEqual(checked, 5)
        self.assertEqual(complete("distrun", "--format", ""), ["text", "json", "yaml", "env"])

    def test_detection_methods(self):
        description = self.entries["--cluster-detection-method"][1].split("[env")[0]
        named = set(re.findall(r"\b(auto|deactivate)\b", description))
        # "..., or one of local, ompi, ..., torchelastic, mpi (a note)": the first word of each item.
        items = description.split("one of", 1)[1].replace(" or ", ",").split(",")
        named |= {re.match(r"\s*([a-z0-9-]+)", item).group(1) for item in items if item.strip()}
        self.assertGreaterEqual(named, {"auto", "deactivate", "local", "slurm", "ompi", "k8s"})
        self.assertGreaterEqual(set(complete("distrun", "--cluster-detection-method", "")), named)
        self.assertEqual(complete("distrun", "--cluster-detection-method", "sl"), ["slurm"])

    def test_listed_values_of_other_options(self):
        levels = re.findall(r"[a-z]+", self.entries["--log-level"][1].split(":", 1)[1].split("[env")[0])
        self.assertEqual(set(complete("distrun", "--log-level", "")), set(levels))
        families = self.entries["--export"][1].split("any of", 1)[1].split()[0].split(",")
        self.assertEqual(set(complete("distrun", "--export", "")), set(families))
        # A comma list completes its last item.
        self.assertEqual(set(complete("distrun", "--export", "torch,")), {"torch," + f for f in families})
        self.assertIn("USR1", complete("distrun", "--forward-signals", "US"))

    def test_option_equals_value(self):
        # bash splits --format=j at '=' (COMP_WORDBREAKS): the words are --format, =, j.
        self.assertEqual(complete("distrun", "--format", "=", "j"), ["json"])
        self.assertEqual(set(complete("distrun", "--format", "=")), {"text", "json", "yaml", "env"})
        # Without '=' in COMP_WORDBREAKS the word stays whole.
        self.assertEqual(complete("distrun", "--format=y"), ["--format=yaml"])
        # A value given with '=' is not mistaken for the start of the command.
        self.assertIn("--detect", complete("distrun", "--format", "=", "json", "--de"))

    def test_values_of_options_are_skipped_when_finding_the_command(self):
        self.assertIn("--detect", complete("distrun", "--nproc-per-node", "4", "--de"))
        self.assertEqual(complete("distrun", "--nproc-per-node", "4", "--launch-mode", "per-"),
                         ["per-task", "per-node"])

    def test_files_and_directories(self):
        self.assertIn("/etc/hostname", complete("distrun", "--config", "/etc/hostn"))
        self.assertEqual(complete("distrun", "--log-dir", "/et"), ["/etc"])

    def test_verbs(self):
        self.assertEqual(set(complete("distrun", "")), {"kv", "barrier", "progress", "stacks", "status", "check"})
        operations = kv_operations()
        self.assertGreaterEqual(len(operations), 8)
        self.assertEqual(set(complete("distrun", "kv", "")), set(operations))
        self.assertEqual(complete("distrun", "kv", "tr"), ["try-get"])
        self.assertEqual(complete("distrun", "kv", "get", "ckpt/step", "--t"), ["--timeout"])
        self.assertEqual(complete("distrun", "kv", "wait", "a", "b", "--"), ["--timeout"])
        self.assertEqual(complete("distrun", "barrier", "epoch-1", "--"), ["--timeout"])
        self.assertEqual(set(complete("distrun", "stacks", "--")), {"--timeout", "--full", "--output"})
        self.assertEqual(complete("distrun", "progress", "--"), [])
        self.assertEqual(complete("distrun", "kv", "set", "k", "--"), [])
        # check takes distrun's options, then its worker's after --.
        self.assertEqual(complete("distrun", "check", "--npr"), ["--nproc-per-node"])
        self.assertEqual(set(complete("distrun", "check", "--nproc-per-node", "")), {"auto", "gpu", "cpu"})
        self.assertEqual(set(complete("distrun", "check", "--", "--")), set(check_options()))
        self.assertEqual(complete("distrun", "check", "--", "--iters", ""), [])
        self.assertEqual(complete("distrun", "check", ""), [])
        # A verb is a verb only as the first word; elsewhere it starts the worker command.
        self.assertNotIn("set", complete("distrun", "--format", "json", "kv", ""))

    def test_the_worker_command_is_completed_as_a_command(self):
        self.assertIn("python3", complete("distrun", "--", "pyth"))
        self.assertIn("python3", complete("distrun", "--nproc-per-node", "2", "pyth"))
        # The command's own options are not distrun's.
        self.assertNotIn("--format", complete("distrun", "--", "python3", "--for"))
        self.assertNotIn("--format", complete("distrun", "python3", "train.py", "--for"))
        self.assertIn("/etc/hostname", complete("distrun", "--", "cat", "/etc/hostn"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
