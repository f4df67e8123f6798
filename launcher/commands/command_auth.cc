#include "launcher/commands/command_auth.h"

#include <optional>

#include "runtime/auth/munge_socket.h"

namespace distrun {

CommandAuth SetCommandAuth(const std::map<std::string, std::string, std::less<>>& env,
                           GrpcClientConfig* config) {
  auto get = [&env](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  const std::string token = get("DISTRUN_TOKEN");
  MungeSocket socket;
  if (token.empty())
    socket = ChooseMungeSocket(get("DISTRUN_MUNGE_SOCKET"), "DISTRUN_MUNGE_SOCKET", get("SLURM_CONF"));
  return SetClientAuth(token, socket, config);
}

}  // namespace distrun
