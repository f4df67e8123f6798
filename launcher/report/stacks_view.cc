#include "launcher/report/stacks_view.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "diagnosis/stack_parse.h"
#include "diagnosis/stack_report.h"
#include "diagnosis/stack_tree.h"
#include "launcher/report/report_value.h"

namespace distrun {

namespace {
constexpr size_t kNamedOddRanks = 4;

std::vector<RankStack> ParsedStacks(const StacksReply& reply) {
  std::vector<RankStack> ranks;
  ranks.reserve(reply.workers.size());
  for (const WorkerStack& w : reply.workers) {
    RankStack r;
    r.rank = w.rank;
    r.host = w.host;
    r.pid = w.pid;
    r.gpu = w.gpu;
    r.mechanism = w.mechanism;
    r.error = w.error;
    if (r.error.empty()) {
      r.threads = w.mechanism == "python" ? ParseFaulthandler(w.text) : ParseGdbBacktrace(w.text);
      if (r.threads.empty()) r.error = "its " + w.mechanism + " dump held no frame";
    }
    ranks.push_back(std::move(r));
  }
  return ranks;
}

ReportValue TreeNode(const StackTree& tree, int id) {
  const StackNode& node = tree.node(id);
  std::vector<int> children = node.children;
  std::stable_sort(children.begin(), children.end(),
                   [&](int a, int b) { return tree.node(a).ranks.size() > tree.node(b).ranks.size(); });
  ReportList kids;
  for (int child : children) kids.push_back(TreeNode(tree, child));
  return ReportMap{{"label", tree.label(id)},
                   {"ranks", node.ranks.ToString()},
                   {"count", static_cast<int>(node.ranks.size())},
                   {"children", std::move(kids)}};
}

}  // namespace

std::string StacksTreeJson(const StacksReply& reply) {
  StackTree tree = StackTree::Build(ParsedStacks(reply));
  ReportList missing;
  for (const std::string& m : reply.missing) missing.push_back(m);
  return ToJson(ReportMap{{"ranks", static_cast<int>(tree.ranks().size())},
                          {"missing", std::move(missing)},
                          {"tree", TreeNode(tree, StackTree::kRoot)}},
                0);
}

StacksPicture DrawStacks(const StacksReply& reply, size_t max_lines) {
  std::vector<RankStack> ranks = ParsedStacks(reply);
  StackTree tree = StackTree::Build(ranks);
  StacksPicture picture;
  picture.screen = RenderSummary(tree, ranks, max_lines);
  picture.full = RenderFullDump(tree, ranks);
  size_t named = 0;
  for (const OddClass& odd : OddRanks(tree, ranks)) {
    for (const RankStack* r : odd.members) {
      picture.odd_ranks.push_back(r->rank);
      if (++named > kNamedOddRanks) continue;
      if (!picture.odd_summary.empty()) picture.odd_summary += ", ";
      picture.odd_summary +=
          "rank " + std::to_string(r->rank) + " (" + r->host + ", pid " + std::to_string(r->pid) + ")";
    }
  }
  if (named > kNamedOddRanks)
    picture.odd_summary += " and " + std::to_string(named - kNamedOddRanks) + " more";
  for (const std::string& m : reply.missing) {
    const std::string line = "no answer from " + m + "\n";
    picture.screen += line;
    picture.full += line;
  }
  return picture;
}

std::string WriteStacksFile(const std::filesystem::path& dir, const std::string& text, std::string* problem) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &utc);
  for (int n = 0; n < 100; ++n) {
    std::string name = std::string("stacks-") + stamp + (n ? "-" + std::to_string(n) : "") + ".txt";
    std::filesystem::path path = dir / name;
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) continue;
    if (fd < 0) {
      *problem = "cannot write " + path.string() + ": " + std::strerror(errno);
      return {};
    }
    size_t done = 0;
    while (done < text.size()) {
      ssize_t w = ::write(fd, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        *problem = "cannot write " + path.string() + ": " + std::strerror(errno);
        ::close(fd);
        return {};
      }
      done += static_cast<size_t>(w);
    }
    ::close(fd);
    return path.string();
  }
  *problem = "too many stack dumps in " + dir.string() + " this second";
  return {};
}

}  // namespace distrun
