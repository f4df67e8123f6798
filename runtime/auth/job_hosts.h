#pragma once
// Who may use the store that node 0 serves to PyTorch: TCPStore's protocol carries no credentials, so the
// only proof a connection belongs to the job is where it comes from. Allowed are this host (loopback, or a
// connection to the very address it comes from) and the hosts of agents admitted with the job token, for
// as long as one of them is connected. A host an elastic job fenced loses its agent's connection, and so
// its access. Anyone with a process on a job host can still reach the store, as with torch's own server.

#include <map>
#include <string>

namespace distrun {

// The peer's address without its port ("10.0.0.2", "fd00::2"); an IPv4 peer of an IPv6 socket as IPv4.
// Empty when the socket has no peer.
std::string PeerAddress(int fd);
// Whether the peer runs on this host: loopback, or the address it reached (the kernel sends a
// connection to one of this host's own addresses from that same address).
bool PeerIsThisHost(int fd);

// Whether `host` (no port) can only be reached from this machine: 127.0.0.0/8, ::1, localhost.
bool IsLoopbackHost(const std::string& host);

class JobHosts {
 public:
  void Add(const std::string& address);
  void Remove(const std::string& address);
  bool Contains(const std::string& address) const { return counts_.count(address) != 0; }

 private:
  std::map<std::string, int> counts_;  // agents connected from each address
};

}  // namespace distrun
