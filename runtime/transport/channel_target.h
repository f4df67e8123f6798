#pragma once
// The gRPC target for a coordinator address (host:port, [v6]:port). The name is resolved here, with
// getaddrinfo, as every other program on the host resolves names (/etc/hosts, nsswitch.conf), and gRPC gets
// the addresses ("ipv4:10.0.0.1:61440"). gRPC's own DNS resolver (c-ares) asks DNS servers before
// /etc/hosts; where they do not answer, as on cluster nodes named only in /etc/hosts with no reachable DNS,
// every connection waited 3 s for its timeout. A name that does not resolve yet (a Kubernetes pod not ready)
// is left to gRPC's resolver, which tries again.

#include <string>

namespace distrun {

std::string ChannelTarget(const std::string& address);

}  // namespace distrun
