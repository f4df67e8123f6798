#include "runtime/auth/munge_socket.h"

#include "runtime/auth/slurm_conf.h"

namespace distrun {

std::string MungeSocket::Describe() const {
  return path.empty() ? "libmunge's default socket" : path + " (" + source + ")";
}

MungeSocket ChooseMungeSocket(const std::optional<std::string>& given, const std::string& given_source,
                              const std::string& slurm_conf, const std::filesystem::path& root) {
  if (given && !given->empty()) return {*given, given_source, {}};
  SlurmConfMunge slurm = ReadSlurmConfMunge(slurm_conf, root);
  if (!slurm.socket.empty()) return {slurm.socket, "AuthInfo in " + slurm.file, {}};
  return {{},
          "libmunge's default",
          slurm.problem.empty() ? "" : slurm.problem + "; using libmunge's default socket"};
}

}  // namespace distrun
