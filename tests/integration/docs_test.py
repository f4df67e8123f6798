"""--help and man/distrun.1 list the same options, and the man page renders without warnings."""
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from distrun_harness import run  # noqa: E402

MAN = os.path.join(os.path.dirname(__file__), "..", "..", "man", "distrun.1")


def help_options():
    r = run(["--help"])
    assert r.returncode == 0, r.stderr
    return set(re.findall(r"^\s+(?:-h,)?(--[a-z][a-z-]*)", r.stdout, re.M))


def man_options():
    text = open(MAN).read()
    # Option entries are the first word of the line after .TP: `.BI \-\-name " ARG"` or `.B \-\-name`.
    names = set()
    lines = text.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == ".TP":
            m = re.match(r'\.B[IR]?\s+(?:\\-h\s*"?,\s*"?\s*)?(\\-\\-[a-z\\-]+)', lines[i + 1])
            if m:
                names.add(m.group(1).replace("\\-", "-"))
    return names


class Docs(unittest.TestCase):
    def test_help_and_man_list_the_same_options(self):
        self.assertEqual(help_options(), man_options())

    def test_man_page_renders_without_warnings(self):
        r = subprocess.run(["groff", "-ww", "-man", "-Tutf8", MAN], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertEqual(r.stderr, "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
