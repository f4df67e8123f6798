#include "launcher/plan/worker_command.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "detect/errors.h"
#include "detect/test_temp_root.h"

namespace distrun {
namespace {

using Args = std::vector<std::string>;

Environment EnvWith(std::map<std::string, std::string, std::less<>> vars) {
  Environment env;
  env.vars = std::move(vars);
  return env;
}

TEST(WorkerCommand, APythonScriptWithoutDashesRunsWithPythonUnbufferedAsTorchrunRunsIt) {
  Environment env = EnvWith({});
  EXPECT_EQ(WorkerCommand({"train.py", "--lr", "0.1"}, false, std::nullopt, env),
            (Args{"python3", "-u", "train.py", "--lr", "0.1"}));
  EXPECT_EQ(WorkerCommand({"dir/train.py"}, false, ScriptForm::kScript, env),
            (Args{"python3", "-u", "dir/train.py"}));
}

TEST(WorkerCommand, AfterDashesAnythingElseAndNoPythonRunAsGiven) {
  Environment env = EnvWith({});
  EXPECT_EQ(WorkerCommand({"train.py"}, true, std::nullopt, env), (Args{"train.py"}));
  EXPECT_EQ(WorkerCommand({"./train", "x.py"}, false, std::nullopt, env), (Args{"./train", "x.py"}));
  EXPECT_EQ(WorkerCommand({"python", "train.py"}, false, std::nullopt, env), (Args{"python", "train.py"}));
  EXPECT_EQ(WorkerCommand({"train.py"}, false, ScriptForm::kProgram, env), (Args{"train.py"}));
  EXPECT_EQ(WorkerCommand({".py"}, false, std::nullopt, env), (Args{".py"}));
  EXPECT_EQ(WorkerCommand({}, false, ScriptForm::kModule, env), Args{});
}

TEST(WorkerCommand, AModuleRunsWithPythonDashM) {
  Environment env = EnvWith({});
  EXPECT_EQ(WorkerCommand({"pkg.train", "--x"}, false, ScriptForm::kModule, env),
            (Args{"python3", "-u", "-m", "pkg.train", "--x"}));
  EXPECT_EQ(WorkerCommand({"pkg.train"}, true, ScriptForm::kModule, env),
            (Args{"python3", "-u", "-m", "pkg.train"}));
  EXPECT_THROW(WorkerCommand({"--x"}, false, ScriptForm::kModule, env), UsageError);
}

TEST(WorkerCommand, PythonIsPythonExecElseTheActiveEnvironmentsElsePython3) {
  testing::TempRoot root;
  for (const char* python : {"venv/bin/python", "conda/bin/python3"}) {
    root.Write(python, "");
    ::chmod((root.path() / python).c_str(), 0755);
  }
  Environment env = EnvWith({{"VIRTUAL_ENV", "/venv"}, {"CONDA_PREFIX", "/conda"}});
  env.root = root.path();
  EXPECT_EQ(WorkerPython(env), "/venv/bin/python");
  env.vars.erase("VIRTUAL_ENV");
  EXPECT_EQ(WorkerPython(env), "/conda/bin/python3");
  env.vars["PYTHON_EXEC"] = "/opt/py/bin/python3.12";
  EXPECT_EQ(WorkerPython(env), "/opt/py/bin/python3.12");
  EXPECT_EQ(WorkerCommand({"t.py"}, false, std::nullopt, env),
            (Args{"/opt/py/bin/python3.12", "-u", "t.py"}));
  env.vars = {{"VIRTUAL_ENV", "/no-such-venv"}};
  EXPECT_EQ(WorkerPython(env), "python3");
  // Not active, but distrun is this environment's (the wheel in a venv, run by its path).
  env.program = "/venv/bin/distrun";
  EXPECT_EQ(WorkerPython(env), "python3");  // no pyvenv.cfg: any bin/ directory
  root.Write("venv/pyvenv.cfg", "home = /usr/bin\n");
  EXPECT_EQ(WorkerPython(env), "/venv/bin/python");
  env.vars["VIRTUAL_ENV"] = "/conda";  // the active one wins
  EXPECT_EQ(WorkerPython(env), "/conda/bin/python3");
}

}  // namespace
}  // namespace distrun
