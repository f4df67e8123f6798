#include "launcher/remote/forwarded_env.h"

#include <string_view>

#include "detect/errors.h"

namespace distrun {
namespace {

constexpr std::string_view kNames[] = {
    "PATH",      "LD_LIBRARY_PATH",  "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_SHLVL", "LANG",         "LC_ALL",
    "LC_CTYPE",  "PYTHON_EXEC"};
constexpr std::string_view kFamilies[] = {
    "CUDA_",     "NCCL_",  "NVIDIA_",       "CUBLAS_",        "CUDNN_", "OMP_", "MKL_",
    "OPENBLAS_", "TORCH_", "PYTORCH_",      "TORCHINDUCTOR_", "JAX_",   "XLA_", "TF_",
    "KERAS_",    "HF_",    "TRANSFORMERS_", "PYTHON",         "UCX_",   "FI_",  "GLOO_"};
constexpr std::string_view kNever[] = {"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES"};

}  // namespace

bool ForwardedByDefault(const std::string& name) {
  for (std::string_view n : kNever) {
    if (name == n) return false;
  }
  for (std::string_view n : kNames) {
    if (name == n) return true;
  }
  for (std::string_view f : kFamilies) {
    if (name.starts_with(f)) return true;
  }
  return false;
}

std::vector<std::string> ForwardedVariables(const std::map<std::string, std::string, std::less<>>& vars,
                                            const std::vector<std::string>& forward) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : vars) {
    if (ForwardedByDefault(name)) out[name] = value;
  }
  for (const std::string& item : forward) {
    if (const size_t eq = item.find('='); eq != std::string::npos) {
      out[item.substr(0, eq)] = item.substr(eq + 1);
    } else if (item.ends_with('*')) {
      const std::string prefix = item.substr(0, item.size() - 1);
      for (auto it = vars.lower_bound(prefix); it != vars.end() && it->first.starts_with(prefix); ++it) {
        out[it->first] = it->second;
      }
    } else if (auto it = vars.find(item); it != vars.end()) {
      out[item] = it->second;
    } else {
      throw UsageError("-x " + item + ": " + item + " is not set here; set it, or give -x " + item +
                       "=VALUE");
    }
  }
  std::vector<std::string> list;
  for (const auto& [name, value] : out) list.push_back(name + "=" + value);
  return list;
}

}  // namespace distrun
