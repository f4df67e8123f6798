#include "slurm_lab.h"

#include <signal.h>

#include <fstream>
#include <stdexcept>

namespace distrun::bench {
namespace {

int RecordedPid(const std::string& dir, const std::string& name) {
  std::ifstream in(dir + "/pids/" + name + ".pid");
  int pid = 0;
  in >> pid;
  return pid;
}

}  // namespace

SlurmLab SlurmLab::Open(const std::string& dir) {
  int ctld = RecordedPid(dir, "slurmctld");
  if (ctld <= 0 || ::kill(ctld, 0) != 0) {
    throw std::runtime_error("the Slurm lab is not up under " + dir +
                             "; start it with tests/cluster/lab.sh up (and stop it with lab.sh down)");
  }
  return SlurmLab{dir};
}

std::vector<std::string> SlurmLab::OnLoginHost(const std::vector<std::string>& args) const {
  std::vector<std::string> out = {
      "/usr/bin/nsenter", "--target", std::to_string(RecordedPid(dir, "slurmctld")), "--net", "--uts",
      "--mount",          "--"};
  out.insert(out.end(), args.begin(), args.end());
  return out;
}

std::vector<std::string> SlurmLab::ClientEnv(const std::vector<std::string>& extra) const {
  std::vector<std::string> env = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin",
                                  "SLURM_CONF=" + dir + "/etc/slurm.conf",
                                  "DISTRUN_TOKEN=distrun-bench-lab-token"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

}  // namespace distrun::bench
