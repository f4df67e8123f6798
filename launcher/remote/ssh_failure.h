#pragma once
// Why a host failed the check before a launch, in words a user can act on, from what ssh (or the remote
// shell) said and how it ended; and the table of every host's outcome that distrun prints.

#include <string>
#include <string_view>
#include <vector>

namespace distrun {

// `exit_code`: ssh's (255: ssh's own failure; 127/126: the remote shell could not run distrun), or -1 when
// it was killed; `said`: its standard error.
std::string DescribeSshFailure(int exit_code, std::string_view said, const std::string& remote_path);

struct HostCheck {
  std::string host;     // as the user wrote it
  std::string outcome;  // "ok", or what failed
  bool ok = false;
};
// "host      outcome" lines under a header, failed hosts marked.
std::string FormatCheckTable(const std::vector<HostCheck>& checks);

}  // namespace distrun
