// libFuzzer target for the hosts of a job started over ssh (launcher/config/host_list.h): a hostfile's text
// (ParseHostfile) and -H's value (ParseHostList), both written by the user or by a batch system (a
// PBS_NODEFILE, a machinefile). UsageError is the only failure. Every host must be a valid name or address
// named once per user, with 1 to 4096 slots where any are given, and the hosts a hostfile lists must read
// back the same from the -H value they make; any other exception, a crash, a leak or a sanitizer report is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "detect/errors.h"
#include "launcher/config/host_list.h"

namespace {

using namespace distrun;

void Check(const std::vector<HostEntry>& hosts) {
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostEntry& e = hosts[i];
    if (e.host.empty() || e.host.find_first_of("@[], \t\n") != std::string::npos) __builtin_trap();
    if (e.slots && (*e.slots < 1 || *e.slots > 4096)) __builtin_trap();
    for (size_t j = 0; j < i; ++j) {
      if (hosts[j].host == e.host && hosts[j].user == e.user) __builtin_trap();
    }
  }
}

// The -H value that names `hosts`: "user@host:N", IPv6 addresses in brackets.
std::string HostListOf(const std::vector<HostEntry>& hosts) {
  std::string out;
  for (const HostEntry& e : hosts) {
    if (!out.empty()) out += ',';
    if (!e.user.empty()) out += e.user + "@";
    out += e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    if (e.slots) out += ":" + std::to_string(*e.slots);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const std::vector<HostEntry> hosts = ParseHostfile("hosts.txt", text);
    if (hosts.empty()) __builtin_trap();
    Check(hosts);
    bool listable = true;  // a user name with a blank or a ',' cannot be written in -H
    for (const HostEntry& e : hosts)
      listable = listable && e.user.find_first_of(", \t\r\n") == std::string::npos;
    if (listable) {
      std::vector<HostEntry> again = ParseHostList("-H", HostListOf(hosts));
      if (again.size() != hosts.size()) __builtin_trap();
      for (size_t i = 0; i < hosts.size(); ++i) {
        if (again[i].user != hosts[i].user || again[i].host != hosts[i].host ||
            again[i].slots != hosts[i].slots) {
          __builtin_trap();
        }
      }
    }
  } catch (const UsageError&) {
  }
  try {
    Check(ParseHostList("-H", text));
  } catch (const UsageError&) {
  }
  return 0;
}
