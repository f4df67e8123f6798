#include "launcher/remote/host_loss.h"

#include <signal.h>

namespace distrun {

bool NodeZeroEndedTheJob(int exit_code, bool elastic) {
  if (exit_code < 0 || exit_code == kSshLostExitCode) return false;
  return !(elastic && exit_code == kNodeLeftExitCode);
}

int RemoteNodeExitCode(int supervisor_exit_code, bool launcher_lost) {
  return launcher_lost && supervisor_exit_code == 128 + SIGTERM ? kNodeLeftExitCode : supervisor_exit_code;
}

std::string DescribeLostHost(const std::string& destination, size_t node, int exit_code, bool elastic) {
  const bool standby = node == 0 && elastic;
  std::string text;
  if (exit_code == kSshLostExitCode) {
    text = "the ssh connection to " + destination +
           (node == 0 ? " (node 0, which hosts the job's coordinator)" : "") +
           " ended (code 255): the host or the link to it is lost";
  } else if (standby && exit_code == kNodeLeftExitCode) {
    text = "node 0 on " + destination +
           ", which hosted the job's coordinator, left the job (exit code 75: fenced, or cut off from the "
           "launcher)";
  } else {
    return "";
  }
  if (standby)
    text += "; its standby takes the job over and the job goes on without it, if enough nodes remain";
  return text;
}

}  // namespace distrun
