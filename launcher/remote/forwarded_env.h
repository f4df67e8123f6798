#pragma once
// The variables each host's distrun gets from the launcher's environment, so that `python` and the
// libraries there are the ones used here (a non-interactive ssh runs no .bashrc that would activate a venv):
// a default set training needs, and what -x names (mpirun's spelling).

#include <map>
#include <string>
#include <vector>

namespace distrun {

// The default set: PATH, LD_LIBRARY_PATH, the active venv or conda prefix, the locale, PYTHON_EXEC and the
// families of CUDA, NCCL, NVIDIA's libraries, OpenMP and the BLAS, PyTorch, JAX/XLA, TensorFlow/Keras,
// Hugging Face, Python, UCX and libfabric; never CUDA_VISIBLE_DEVICES or NVIDIA_VISIBLE_DEVICES (each host's
// own GPUs), nor distrun's own options (they travel as flags).
bool ForwardedByDefault(const std::string& name);

// "NAME=VALUE" for each variable a host gets, sorted by name. `forward` holds -x's items: NAME (this
// machine's value: a UsageError when it is unset here), NAME=VALUE, PREFIX* (every variable set here whose
// name starts with PREFIX).
std::vector<std::string> ForwardedVariables(const std::map<std::string, std::string, std::less<>>& vars,
                                            const std::vector<std::string>& forward);

}  // namespace distrun
