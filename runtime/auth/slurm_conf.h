#pragma once
// Where munged listens according to Slurm's configuration: clusters that run munged elsewhere than libmunge's
// default socket say so in slurm.conf (`AuthInfo=socket=PATH`, possibly in a file it includes), which every
// step's SLURM_CONF names. Read from the file system (under `root`, for tests); scontrol is not needed.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

struct SlurmConfMunge {
  std::string socket;  // AuthInfo's socket=PATH; "" when the configuration names none
  std::string file;    // the file whose AuthInfo named it (slurm.conf or one it includes)
  std::string config;  // the slurm.conf read: SLURM_CONF, else /etc/slurm/slurm.conf; "" when there is none
  // One line when the configuration cannot be used (unreadable, an include that cannot be read or loops);
  // `socket` is then "". Never an exception: a bad slurm.conf must not stop a job.
  std::string problem;
};

// `slurm_conf` (SLURM_CONF's value; "": unset), else the standard location when it exists. Later AuthInfo
// lines win, as in Slurm; `Include` lines are followed (relative to the including file's directory; `*` and
// `?` in the last component).
SlurmConfMunge ReadSlurmConfMunge(const std::string& slurm_conf, const std::filesystem::path& root = "/");

// What one file's text says that matters here, in the file's order: the parser under ReadSlurmConfMunge,
// apart from the file system. Never throws.
struct SlurmConfItem {
  enum class Kind { kAuthInfo, kInclude };
  Kind kind = Kind::kAuthInfo;
  // kAuthInfo: its socket=PATH ("" when it names none); kInclude: the file as written ("": none given).
  std::string value;
};
std::vector<SlurmConfItem> ParseSlurmConfText(std::string_view text);

}  // namespace distrun
