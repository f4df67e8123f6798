#pragma once
// The picture of a job's stacks (DESIGN §4.2): what every node collected
// (launcher/supervise/worker_watch.h), parsed and merged into one tree (diagnosis/), as one screen for the
// console and a full dump for a file.
// Used by `distrun stacks` and by node 0 when the hang watch finds the job hung.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "runtime/service/types.h"

namespace distrun {

// Lines of the merged stacks on the console: one screen.
inline constexpr size_t kStacksScreenLines = 40;

struct StacksPicture {
  std::string screen;  // the merged tree and the odd ranks, at most the lines asked for
  std::string full;    // every rank's stack, then the whole tree
  // The ranks whose stacks stand apart from the majority's, smallest class first (at most a few), and them
  // in words: "rank 3 (host-b, pid 4242)".
  std::vector<int> odd_ranks;
  std::string odd_summary;
};

StacksPicture DrawStacks(const StacksReply& reply, size_t max_lines);

// The merged tree as the job's page draws it (runtime/metrics/observe_server.h's /stacks.json):
// {"ranks": N, "missing": [...], "tree": {"label", "ranks" ("0-3,5"), "count", "children": [...]}}, the
// children of a node largest first.
std::string StacksTreeJson(const StacksReply& reply);

// Writes `text` to a new file in `dir` named "stacks-<UTC time>[-N].txt"; returns its path, or "" with
// *problem saying why not.
std::string WriteStacksFile(const std::filesystem::path& dir, const std::string& text, std::string* problem);

}  // namespace distrun
