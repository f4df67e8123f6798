#include "launcher/plan/worker_command.h"

#include <unistd.h>

#include "detect/errors.h"

namespace distrun {

std::string WorkerPython(const Environment& env) {
  if (const std::string* exec = env.Get("PYTHON_EXEC"); exec && !exec->empty()) return *exec;
  auto python_in = [&](const std::string& prefix) -> std::string {
    for (const char* name : {"/bin/python", "/bin/python3"}) {
      if (::access(env.Path(prefix + name).c_str(), X_OK) == 0) return prefix + name;
    }
    return "";
  };
  for (const char* active : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const std::string* prefix = env.Get(active);
    if (prefix == nullptr || prefix->empty()) continue;
    if (std::string python = python_in(*prefix); !python.empty()) return python;
  }
  // distrun installed in an environment that is not active (the wheel in a venv, run by its path): that
  // environment's Python, as its torchrun would run it.
  const size_t slash = env.program.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    const std::string bin = env.program.substr(0, slash);
    const std::string prefix = bin.substr(0, bin.rfind('/'));
    if (bin.ends_with("/bin") && (::access(env.Path(prefix + "/pyvenv.cfg").c_str(), F_OK) == 0 ||
                                  ::access(env.Path(prefix + "/conda-meta").c_str(), F_OK) == 0)) {
      if (std::string python = python_in(prefix); !python.empty()) return python;
    }
  }
  return "python3";
}

std::vector<std::string> WorkerCommand(const std::vector<std::string>& command, bool after_dashes,
                                       std::optional<ScriptForm> form, const Environment& env) {
  if (command.empty() || form == ScriptForm::kProgram) return command;
  const bool script = !after_dashes && command.front().size() > 3 && command.front().ends_with(".py");
  if (form != ScriptForm::kModule && !script) return command;
  // Unbuffered, as torchrun runs it: a worker's lines reach the console as it prints them.
  std::vector<std::string> argv = {WorkerPython(env), "-u"};
  if (form == ScriptForm::kModule) {
    if (command.front().starts_with('-')) {
      throw UsageError("-m needs a module name before the module's arguments (got '" + command.front() +
                       "')");
    }
    argv.emplace_back("-m");
  }
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace distrun
