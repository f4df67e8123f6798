// `distrun-bench python-site`: what distrun's Python site (launcher/supervise/python_site.h) adds to a Python
// worker's start, and what its import hooks (JAX's cluster module, mpi4py, Horovod) add to it: `python3 -c
// pass` with no site of distrun's, with its site without the import hooks, and with the whole site,
// alternated (whole processes, through /usr/bin/env with a worker's variables); the time to import ~120
// standard modules with and without the hooks, measured inside the process; and the finder's own cost per
// import.

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "flags.h"
#include "launcher/supervise/python_site.h"
#include "launcher/supervise/python_sources.h"
#include "process_timer.h"
#include "temp_dir.h"

namespace distrun::bench {
namespace {

// Imports ~120 modules (145 in sys.modules after it), each found once by the finders, timed inside the
// process (the whole process's time varies by more than the finder could cost): prints milliseconds.
constexpr char kImports[] =
    "import time\n"
    "start = time.perf_counter()\n"
    "import argparse, json, logging, pathlib, subprocess, threading, dataclasses, typing, fractions, csv, "
    "shutil, tempfile, hashlib, hmac, statistics, pickle, pprint, textwrap, difflib, heapq, bisect, queue\n"
    "print('%.4f' % ((time.perf_counter() - start) * 1e3))\n";

// The finder's own cost per import of a module it does not hook, in-process: the least of 5 rounds of
// 200,000 look-ups.
constexpr char kPerImport[] =
    "import sys, time\n"
    "hook = next(f for f in sys.meta_path if type(f).__name__ == '_DistrunImportHook')\n"
    "names = ['package%d.module' % i for i in range(1000)]\n"
    "best = None\n"
    "for _ in range(5):\n"
    "    start = time.perf_counter()\n"
    "    for _ in range(200):\n"
    "        for name in names:\n"
    "            hook.find_spec(name)\n"
    "    took = (time.perf_counter() - start) / 200000\n"
    "    best = took if best is None else min(best, took)\n"
    "print('%.3f' % (best * 1e6))\n";

// The first line a command prints (its exit status must be 0).
std::string RunForOutput(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  std::string line;
  std::string command;
  for (const std::string& a : argv) {
    command += " '";
    for (char c : a) command += c == '\'' ? std::string("'\\''") : std::string(1, c);
    command += "'";
  }
  std::string with_env = "env -i";
  for (const std::string& e : env) with_env += " '" + e + "'";
  FILE* p = ::popen((with_env + command).c_str(), "r");
  if (p == nullptr) throw std::runtime_error("cannot run" + command);
  char buf[256];
  if (std::fgets(buf, sizeof buf, p) != nullptr) line = buf;
  if (::pclose(p) != 0) throw std::runtime_error("failed:" + command);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}

}  // namespace

int PythonSiteBench(const Flags& flags) {
  const std::string python = flags.Get("python", "/usr/bin/python3");
  const int runs = static_cast<int>(flags.Int("runs", 200));
  TempDir dir("distrun-python-site-bench");
  PythonSite site((dir.path() / "site").string());
  // The same site without its import hooks: the call that installs them removed.
  const std::string without = (dir.path() / "site-without-hooks").string();
  PythonSite unhooked(without);
  {
    std::string text(embedded::kSitecustomizePy);
    const std::string call = "\n_distrun_hook_imports()\n";
    const size_t at = text.rfind(call);
    if (at == std::string::npos) throw std::runtime_error("the site has no _distrun_hook_imports() call");
    text.replace(at, call.size(), "\n");
    FILE* f = std::fopen((without + "/sitecustomize.py").c_str(), "w");
    if (f == nullptr) throw std::runtime_error("cannot write " + without + "/sitecustomize.py");
    std::fputs(text.c_str(), f);
    std::fclose(f);
  }
  std::filesystem::create_directory(dir.path() / "stacks");
  const std::vector<std::string> env = {"PATH=/usr/bin:/bin",
                                        "HOME=" + dir.path().string(),
                                        "DISTRUN_STACKS_DIR=" + (dir.path() / "stacks").string(),
                                        "DISTRUN_STACK_SIGNAL=39",
                                        "DISTRUN_NUM_PROCESSES=8",
                                        "DISTRUN_PROCESS_ID=3",
                                        "JAX_COORDINATOR_ADDRESS=127.0.0.1:4242"};
  auto command = [&](const std::string& pythonpath, const std::string& code) {
    std::vector<std::string> argv = {"/usr/bin/env"};
    if (pythonpath.empty()) {
      argv.push_back("-u");
      argv.push_back("PYTHONPATH");
    } else {
      argv.push_back("PYTHONPATH=" + pythonpath);
    }
    argv.insert(argv.end(), {python, "-c", code});
    return argv;
  };
  struct Row {
    const char* name;
    std::vector<std::string> argv;
  };
  const std::vector<Row> rows = {
      {"pass, no distrun site", command("", "pass")},
      {"pass, site without hooks", command(without, "pass")},
      {"pass, whole site", command(site.dir(), "pass")},
  };
  std::vector<std::vector<std::string>> commands;
  for (const Row& r : rows) commands.push_back(r.argv);
  std::vector<std::vector<double>> samples = TimeAlternated(commands, env, runs, /*warm=*/5);
  // The imports, alternated, timed by the process itself (seconds, as TimeAlternated's).
  samples.resize(5);
  for (int i = 0; i < std::max(runs / 4, 10); ++i) {
    samples[3].push_back(std::stod(RunForOutput(command(without, kImports), env)) / 1e3);
    samples[4].push_back(std::stod(RunForOutput(command(site.dir(), kImports), env)) / 1e3);
  }
  std::vector<Summary> s;
  for (const auto& x : samples) s.push_back(Summarize(x));
  const char* names[] = {rows[0].name, rows[1].name, rows[2].name, "imports, site without hooks (in-process)",
                         "imports, whole site (in-process)"};
  for (size_t i = 0; i < s.size(); ++i) {
    std::printf("%-42s median %.2f ms  p10 %.2f  p90 %.2f\n", names[i], s[i].median * 1e3, s[i].p10 * 1e3,
                s[i].p90 * 1e3);
  }
  std::printf("the import hooks add %.3f ms to `pass` and %.3f ms to the imports (medians)\n",
              (s[2].median - s[1].median) * 1e3, (s[4].median - s[3].median) * 1e3);
  std::printf("distrun's whole site adds %.3f ms to `pass`\n", (s[2].median - s[0].median) * 1e3);
  const std::string per_import = RunForOutput(command(site.dir(), kPerImport), env);
  std::printf("the finder's cost per import of a module it does not hook: %s us\n", per_import.c_str());
  std::printf(
      "{\"bench\": \"python-site\", \"python\": \"%s\", \"runs\": %d, \"pass_no_site_ms\": %.3f, "
      "\"pass_without_hooks_ms\": %.3f, \"pass_site_ms\": %.3f, \"imports_without_hooks_ms\": %.3f, "
      "\"imports_site_ms\": %.3f, \"finder_us_per_import\": %s}\n",
      python.c_str(), runs, s[0].median * 1e3, s[1].median * 1e3, s[2].median * 1e3, s[3].median * 1e3,
      s[4].median * 1e3, per_import.c_str());
  return 0;
}

}  // namespace distrun::bench
