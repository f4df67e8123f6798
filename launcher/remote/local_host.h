#pragma once
// Whether a host named in -H or a hostfile is this machine, which needs no ssh (Hydra's autofork).

#include <string>

namespace distrun {

// True for loopback names and addresses, this machine's host name (short or full), and names that resolve to
// an address of one of this machine's interfaces. A name that does not resolve is not this machine (ssh then
// says what is wrong with it).
bool IsThisMachine(const std::string& host, const std::string& hostname);
// localhost and the loopback addresses: names no other host can use for this one.
bool IsLoopback(const std::string& host);

}  // namespace distrun
