#pragma once
// The Python distrun adds to every Python worker (DESIGN §4.2, §4.6): a sitecustomize.py, which Python runs
// at start-up from the first directory of PYTHONPATH that has one, and the modules it loads, written into a
// private directory that goes first on the workers' PYTHONPATH. It registers the stack dump (with
// DISTRUN_STACKS_DIR, launcher/supervise/stack_collector.h), renames torch's Flight Recorder variables, hooks
// the import of frameworks that detect their world themselves (JAX, mpi4py), then runs the sitecustomize it
// shadows. Python started with -S or -I runs none of it.

#include <string>

namespace distrun {

class PythonSite {
 public:
  // Creates `dir` (0700) and writes sitecustomize.py and _distrun_jax.py (python/distrun/jax.py) into it,
  // each whole under another name and renamed; throws std::runtime_error when it cannot.
  explicit PythonSite(std::string dir);

  // A worker's PYTHONPATH: this directory, then `existing` (the worker's own) when it is not empty.
  std::string PythonPath(const std::string& existing) const;

  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace distrun
