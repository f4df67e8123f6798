#!/usr/bin/env python3
"""The rooms of ARCHITECTURE.md hold: each room's code includes only its own headers and those of the rooms
its CMake library names (directly or through them), so dependencies point one way. Reads the sources and
the CMakeLists.txt files; builds nothing."""

import os
import re
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CMAKE_FILES = ["CMakeLists.txt", "runtime/CMakeLists.txt", "launcher/CMakeLists.txt"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Interfaces a room may use without linking the room that implements them (ARCHITECTURE.md: supervision
# sees the runtime only through job_link.h, plain types over the plan and the service's values).
INTERFACES = {"launcher/supervise": {"launcher/job/job_link.h"}}


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def rooms():
    """{library: (folder relative to the root, [deps])} from every distrun_room(...) call."""
    found = {}
    for cmake in CMAKE_FILES:
        base = os.path.dirname(cmake)
        text = re.sub(r"#[^\n]*", "", read(cmake))
        for name, folder, rest in re.findall(r"distrun_room\((\w+)\s+([^\s)]+)([^)]*)\)", text):
            deps = []
            if "DEPS" in rest:
                deps = [d for d in rest.split("DEPS", 1)[1].split() if not d.startswith("$")]
            found[name] = (os.path.normpath(os.path.join(base, folder)), deps)
    return found


def closure(name, all_rooms, seen=None):
    seen = set() if seen is None else seen
    for dep in all_rooms.get(name, ("", []))[1]:
        if dep not in seen:
            seen.add(dep)
            closure(dep, all_rooms, seen)
    return seen


def room_of(header, folders):
    """The room folder a project header lives in, or None for headers of no room."""
    folder = os.path.dirname(header)
    return folder if folder in folders else None


class Rooms(unittest.TestCase):
    def setUp(self):
        self.rooms = rooms()
        self.folders = {folder: name for name, (folder, _) in self.rooms.items()}

    def test_the_rooms_are_those_the_architecture_names(self):
        for folder in ["detect", "diagnosis", "runtime/service", "runtime/auth", "runtime/io",
                       "runtime/progress", "runtime/torch_store", "runtime/transport", "runtime/agent",
                       "runtime/client", "launcher/process", "launcher/config", "launcher/plan",
                       "launcher/report", "launcher/job", "launcher/supervise", "launcher/commands",
                       "launcher/module"]:
            self.assertIn(folder, self.folders, "no CMake library for " + folder)
        architecture = read("ARCHITECTURE.md")
        for folder in self.folders:
            self.assertIn("`" + folder.split("/")[-1] + "/`", architecture, folder + " is not described")

    def test_every_include_points_to_the_room_itself_or_one_it_depends_on(self):
        problems = []
        for name, (folder, _) in sorted(self.rooms.items()):
            deps = closure(name, self.rooms)
            allowed = {self.rooms[d][0] for d in deps if d in self.rooms}
            for file in sorted(os.listdir(os.path.join(ROOT, folder))):
                if not file.endswith((".h", ".cc")) or file.endswith(("_test.cc", "_fuzz.cc")):
                    continue
                path = os.path.join(folder, file)
                for header in INCLUDE.findall(read(path)):
                    if header.startswith("distrun/"):  # the C API's public headers (runtime/include)
                        continue
                    if header in ("runtime/distrun.pb.h", "runtime/distrun.grpc.pb.h"):
                        if "distrun_proto" not in deps:
                            problems.append(f"{path}: {header} without distrun_proto")
                        continue
                    if header in INTERFACES.get(folder, set()):
                        continue
                    target = room_of(header, self.folders)
                    if target is None:
                        if "/" in header and header.split("/")[0] in ("runtime", "launcher"):
                            problems.append(f"{path}: {header} is in no room")
                        continue
                    if target != folder and target not in allowed:
                        problems.append(f"{path}: includes {header}, but {name} does not depend on "
                                        f"{self.folders[target]}")
        self.assertEqual(problems, [], "\n".join(problems))

    def test_lower_layers_never_include_upper_ones(self):
        problems = []
        for top, forbidden in [("detect", ("launcher/", "runtime/")), ("diagnosis", ("launcher/", "runtime/")),
                               ("runtime", ("launcher/",))]:
            for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
                for file in files:
                    if file.endswith((".h", ".cc")):
                        path = os.path.relpath(os.path.join(dirpath, file), ROOT)
                        problems += [f"{path}: {h}" for h in INCLUDE.findall(read(path))
                                     if h.startswith(forbidden)]
        self.assertEqual(problems, [], "\n".join(problems))

    def test_the_dependencies_have_no_cycle(self):
        for name in self.rooms:
            self.assertNotIn(name, closure(name, self.rooms), name + " depends on itself")

    def test_the_check_refuses_a_room_not_depended_on(self):
        # The check itself: process is below plan, so plan's headers are not process's to include.
        name = "distrun_launcher_process"
        allowed = {self.rooms[d][0] for d in closure(name, self.rooms) if d in self.rooms}
        self.assertNotIn("launcher/plan", allowed)
        self.assertEqual(room_of("launcher/plan/plan.h", self.folders), "launcher/plan")


if __name__ == "__main__":
    unittest.main(verbosity=2)
