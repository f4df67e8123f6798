#pragma once
// The hosts of a job started over ssh (-H, --hostfile): the forms users already have, read into one list.
//   -H a:2,b,root@c:4                       Open MPI's and Horovod's --host
//   a slots=2 max_slots=8                   Open MPI, DeepSpeed, Horovod hostfiles (other keys ignored)
//   a:2                                     MPICH's machinefile
//   a                                       a bare host, or one line per process (PBS_NODEFILE)
//   user@a, # comments, blank lines
// A host named more than once gets the sum of its slots, a bare name counting one: a machinefile's or
// PBS_NODEFILE's lines are one per process. A host named once without slots gets what --nproc-per-node
// decides there.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

struct HostEntry {
  std::string user;          // before '@'; empty: ssh's own choice (~/.ssh/config, the local user)
  std::string host;          // a name or an address (an IPv6 address without brackets)
  std::optional<int> slots;  // workers on this host; unset: --nproc-per-node decides there
  std::string where;         // "-H", "hosts.txt:3": for messages

  // "user@host" or "host": what ssh is given.
  std::string Destination() const { return user.empty() ? host : user + "@" + host; }
  bool operator==(const HostEntry&) const = default;
};

// -H's value. Throws UsageError naming `where` and the item.
std::vector<HostEntry> ParseHostList(const std::string& where, std::string_view value);
// A hostfile's text; `name` is the file's name for messages ("hosts.txt:3: ...").
std::vector<HostEntry> ParseHostfile(const std::string& name, std::string_view text);
// Reads and parses the file; a file that cannot be read is a UsageError naming it.
std::vector<HostEntry> ReadHostfile(const std::string& where, const std::string& path);

}  // namespace distrun
