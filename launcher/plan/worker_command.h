#pragma once
// What each worker runs. A command after "--" (or the config's `command:`) runs as given. Without "--",
// distrun runs a Python script as torchrun does: a first word ending in ".py" becomes `PYTHON -u
// SCRIPT ARGS`, a module after -m `PYTHON -u -m MODULE ARGS`; --no-python (and any other first word)
// runs the words themselves. PYTHON is what torchrun's workers would get: $PYTHON_EXEC, else the
// interpreter of the active virtual environment ($VIRTUAL_ENV) or conda prefix ($CONDA_PREFIX), else that of
// the environment distrun itself is installed in (the wheel's: PREFIX/bin/distrun beside PREFIX/pyvenv.cfg
// or PREFIX/conda-meta), else python3 on the workers' PATH.

#include <optional>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "launcher/config/options.h"

namespace distrun {

// `command` as given; `after_dashes`: whether "--" (or the config file) gave it; `form`: -m or --no-python.
std::vector<std::string> WorkerCommand(const std::vector<std::string>& command, bool after_dashes,
                                       std::optional<ScriptForm> form, const Environment& env);

// The interpreter a script or module runs with (see above).
std::string WorkerPython(const Environment& env);

}  // namespace distrun
