#pragma once
// torchrun's command line (torch.distributed.run), which distrun speaks too, so that a torchrun user changes
// one word: torchrun's options under torchrun's names, in both spellings (--nproc_per_node,
// --nproc-per-node), and its PET_* variables, each turned into what it means in distrun's options. The
// names torchrun shares with distrun (--nproc-per-node, --nnodes, --node-rank, --max-restarts, --log-dir,
// --redirects, --tee, --local-ranks-filter, --role) are distrun's own options and need no translation.
// README's "From torchrun" says what differs.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/config/options.h"

namespace distrun {

// One torchrun option as given: its name with dashes and without the leading ones ("master-port"), its
// value ("" for a flag that takes none), and how the user wrote it ("--master_port", "PET_MASTER_PORT").
struct TorchrunOption {
  std::string name;
  std::string value;
  std::string where;
};

// What torchrun's options mean to distrun.
struct TorchrunMeaning {
  RawValues options;   // distrun's options, each with where it came from
  RawValues defaults;  // distrun's options unless anything else sets them (c10d: --node-rank auto)
  std::optional<ScriptForm> form;  // -m, --no-python, --run-path
};

// For a name only torchrun has (dashes, no leading dashes): whether it takes a value. nullopt: not one of
// torchrun's own (distrun's, or no option at all). "m", "r" and "t" are its one-letter forms.
std::optional<bool> TorchrunOptionTakesValue(std::string_view name);

// The torchrun-only options given, in distrun's terms. Throws UsageError for what torchrun would refuse
// and for what distrun cannot honour (--rdzv-backend etcd), naming what to use instead.
TorchrunMeaning TranslateTorchrun(const std::vector<TorchrunOption>& given);

// torchrun's PET_<NAME> variables in `env`, every option's (PET_NPROC_PER_NODE, PET_MASTER_ADDR, ...), as
// options; a flag variable (PET_STANDALONE, PET_MODULE, PET_NO_PYTHON) counts when it is 1 or true.
std::vector<TorchrunOption> TorchrunVariables(const std::map<std::string, std::string, std::less<>>& env);

// Every option name torchrun knows (for "did you mean"), with dashes.
std::vector<std::string> TorchrunOptionNames();

}  // namespace distrun
