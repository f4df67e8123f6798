#pragma once
// Running Slurm clients on the project's Slurm lab (tests/cluster/lab.sh): commands run on its login host
// "labctl" (slurmctld's network, hostname and mount namespaces) with SLURM_CONF set, as the cluster tests
// run them.

#include <string>
#include <vector>

namespace distrun::bench {

struct SlurmLab {
  std::string dir;  // DISTRUN_LAB_DIR of lab.sh (default /run/distrun-lab)

  // Throws std::runtime_error, saying how to bring it up, when the lab is not up.
  static SlurmLab Open(const std::string& dir);
  // `args` as a command line that runs on labctl.
  std::vector<std::string> OnLoginHost(const std::vector<std::string>& args) const;
  // The environment for Slurm clients: PATH, SLURM_CONF, a job token shared by every node, and `extra`.
  std::vector<std::string> ClientEnv(const std::vector<std::string>& extra = {}) const;
};

}  // namespace distrun::bench
