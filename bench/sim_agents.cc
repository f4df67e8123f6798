#include "sim_agents.h"

#include <arpa/inet.h>

#include <stdexcept>

namespace distrun::bench {

sockaddr_in ParseIpv4(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr) != 1) {
    throw std::invalid_argument("the simulated agents need an IPv4 address:port, not '" + address + "'");
  }
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(colon + 1))));
  return sa;
}

}  // namespace distrun::bench
