#include "diagnosis/stack_report.h"

#include <algorithm>
#include <map>

namespace distrun {
namespace {

constexpr size_t kSetChars = 48;         // a rank set on the screen, before ",..."
constexpr size_t kScreenChildren = 8;    // branches of one node on the screen; the rest are one line
constexpr size_t kScreenClasses = 8;     // odd classes on the screen
constexpr size_t kScreenClassRanks = 8;  // ranks named per odd class on the screen
constexpr size_t kCollapseChain = 4;     // a chain this long shows its first and last frame only

std::string SetTag(const RankSet& set, size_t max_chars) {
  return "[" + std::to_string(set.size()) + "] ranks " + set.ToString(max_chars);
}

std::string Frames(size_t n) { return std::to_string(n) + (n == 1 ? " frame" : " frames"); }

std::string Known(const std::string& s) { return s.empty() ? "?" : s; }

// A worker without a GPU (CPU jobs) has no "gpu" to name.
std::string Where(const RankStack& r) {
  return "host " + Known(r.host) + ", pid " + (r.pid > 0 ? std::to_string(r.pid) : "?") +
         (r.gpu.empty() ? "" : ", gpu " + r.gpu);
}

class TreePrinter {
 public:
  TreePrinter(const StackTree& tree, bool screen)
      : tree_(tree),
        screen_(screen),
        linear_(tree.size()),
        uniform_(tree.size()),
        below_(tree.size()),
        paths_(tree.size()) {
    // Bottom-up (children are stored after their parents).
    for (size_t i = tree.size(); i-- > 0;) {
      const StackNode& n = tree.node(static_cast<int>(i));
      bool same = std::all_of(n.children.begin(), n.children.end(), [&](int c) {
        return uniform_[static_cast<size_t>(c)] && tree.node(c).ranks == n.ranks;
      });
      uniform_[i] = same;
      linear_[i] = same && n.children.size() <= 1 &&
                   (n.children.empty() || linear_[static_cast<size_t>(n.children[0])]);
      paths_[i] = n.children.empty() ? 1 : 0;
      for (int c : n.children) {
        below_[i] += 1 + below_[static_cast<size_t>(c)];
        paths_[i] += paths_[static_cast<size_t>(c)];
      }
    }
  }

  std::vector<std::string> Print() {
    lines_.clear();
    Children(StackTree::kRoot, "");
    return std::move(lines_);
  }

 private:
  std::string Label(int id) const { return screen_ ? ShortLabel(tree_.label(id)) : tree_.label(id); }
  const RankSet& Ranks(int id) const { return tree_.node(id).ranks; }
  // Every rank of `parent` takes `id`, and nothing below it tells them apart (a background thread that all
  // ranks run alike, say).
  bool Alike(int id, int parent) const {
    return uniform_[static_cast<size_t>(id)] && Ranks(id) == Ranks(parent);
  }

  std::vector<int> SortedChildren(int id) const {
    std::vector<int> kids = tree_.node(id).children;
    std::stable_sort(kids.begin(), kids.end(), [this, id](int a, int b) {
      bool xa = Alike(a, id), ya = Alike(b, id);
      if (xa != ya) return !xa;  // what tells ranks apart before what every rank does alike
      const StackNode &x = tree_.node(a), &y = tree_.node(b);
      if (x.ranks.size() != y.ranks.size()) return x.ranks.size() > y.ranks.size();
      bool xl = linear_[static_cast<size_t>(a)], yl = linear_[static_cast<size_t>(b)];
      if (xl != yl) return !xl;  // the one that branches below first
      if (x.ranks.first() != y.ranks.first()) return x.ranks.first() < y.ranks.first();
      return tree_.label(a) < tree_.label(b);
    });
    return kids;
  }

  void Children(int id, const std::string& prefix) {
    std::vector<int> kids = SortedChildren(id);
    // Where most ranks go on and branch again further down, the others' branches come first and the
    // majority's path continues in the same column: ranks that leave a path at many depths then draw a
    // column with branches off it rather than a staircase.
    int spine = -1;
    if (id != StackTree::kRoot && kids.size() >= 2 && 2 * Ranks(kids[0]).size() > Ranks(id).size() &&
        !linear_[static_cast<size_t>(kids[0])] && !Alike(kids[0], id)) {
      spine = kids[0];
      kids.erase(kids.begin());
    }
    size_t shown = kids.size();
    if (screen_ && kids.size() > kScreenChildren) shown = kScreenChildren - 1;
    for (size_t i = 0; i < shown; ++i) {
      bool last = i + 1 == kids.size() && spine < 0;
      Item(kids[i], id, prefix + (last ? "`- " : "|- "), prefix + (last ? "   " : "|  "));
    }
    if (shown < kids.size()) {
      RankSet rest;
      for (size_t i = shown; i < kids.size(); ++i) rest.Merge(Ranks(kids[i]));
      lines_.push_back(prefix + (spine < 0 ? "`- ... " : "|- ... ") + std::to_string(kids.size() - shown) +
                       " more branches: " + SetTag(rest, kSetChars));
    }
    if (spine >= 0) Item(spine, id, prefix, prefix);
  }

  // The chain that starts at `id` (a child of `parent`), then what branches below it. `lead` prefixes its
  // first line, `cont` the others and its children.
  void Item(int id, int parent, const std::string& lead, const std::string& cont) {
    std::vector<int> chain = {id};
    while (true) {
      const StackNode& n = tree_.node(chain.back());
      if (n.children.size() != 1 || !(Ranks(n.children[0]) == n.ranks)) break;
      chain.push_back(n.children[0]);
    }
    std::string tag =
        Ranks(id) == Ranks(parent) ? "" : SetTag(Ranks(id), screen_ ? kSetChars : std::string::npos) + "  ";
    const bool leaf = tree_.node(chain.back()).children.empty();
    const size_t hidden = chain.size() - 2;
    if (screen_ && !leaf && Alike(id, parent)) {
      const size_t i = static_cast<size_t>(id);
      lines_.push_back(lead + tag + Label(id) + " ... " + std::to_string(paths_[i]) + " paths, " +
                       Frames(below_[i]) + ", alike in all its ranks");
      return;
    }
    if (!screen_ || chain.size() < 3 || (!leaf && chain.size() < kCollapseChain)) {
      for (size_t i = 0; i < chain.size(); ++i) lines_.push_back((i ? cont : lead + tag) + Label(chain[i]));
    } else if (leaf) {
      lines_.push_back(lead + tag + Label(chain.front()) + " ... " + Frames(hidden) + " ... " +
                       Label(chain.back()));
    } else {
      lines_.push_back(lead + tag + Label(chain.front()));
      lines_.push_back(cont + "... " + Frames(hidden) + " ...");
      lines_.push_back(cont + Label(chain.back()));
    }
    Children(chain.back(), cont);
  }

  const StackTree& tree_;
  const bool screen_;
  std::vector<bool> linear_;   // one chain, one rank set
  std::vector<bool> uniform_;  // one rank set throughout, branching or not
  std::vector<size_t> below_;  // nodes below
  std::vector<size_t> paths_;  // leaves at or below
  std::vector<std::string> lines_;
};

std::vector<std::string> OddLines(const StackTree& tree, const std::vector<RankStack>& ranks) {
  std::vector<OddClass> odd = OddRanks(tree, ranks);
  if (odd.empty()) return {"odd ranks: none (every rank took the same paths)"};
  RankSet majority = tree.ranks();
  RankSet in_odd;
  for (const OddClass& c : odd) in_odd.Merge(c.ranks);
  RankSet rest;  // the majority: the tree's ranks outside every odd class
  for (const RankSet::Range& r : majority.ranges()) {
    for (int64_t rank = r.lo; rank <= r.hi; ++rank) {
      if (!in_odd.Contains(static_cast<int>(rank))) rest.Add(static_cast<int>(rank));
    }
  }
  std::vector<std::string> lines = {"odd ranks (the majority is " + SetTag(rest, kSetChars) + "):"};
  for (size_t i = 0; i < odd.size() && i < kScreenClasses; ++i) {
    const OddClass& c = odd[i];
    lines.push_back("  " + SetTag(c.ranks, kSetChars) + ":");
    for (size_t j = 0; j < c.members.size() && j < kScreenClassRanks; ++j) {
      const RankStack& r = *c.members[j];
      lines.push_back("    rank " + std::to_string(r.rank) + " (" + Where(r) +
                      "): " + ShortLabel(LeafFrame(r)));
    }
    if (c.ranks.size() > kScreenClassRanks) {
      lines.push_back("    and " + std::to_string(c.ranks.size() - kScreenClassRanks) + " more");
    }
  }
  if (odd.size() > kScreenClasses) {
    RankSet more;
    for (size_t i = kScreenClasses; i < odd.size(); ++i) more.Merge(odd[i].ranks);
    lines.push_back("  and " + std::to_string(odd.size() - kScreenClasses) +
                    " more classes: " + SetTag(more, kSetChars));
  }
  return lines;
}

bool HasStack(const RankStack& r) {
  return r.error.empty() && std::any_of(r.threads.begin(), r.threads.end(),
                                        [](const ThreadStack& t) { return !t.frames.empty(); });
}

std::string Join(const std::vector<std::string>& lines, size_t from, size_t count) {
  std::string out;
  for (size_t i = from; i < from + count && i < lines.size(); ++i) out.append(lines[i]).push_back('\n');
  return out;
}

}  // namespace

std::string ShortLabel(std::string_view label) {
  size_t open = label.rfind(" (");
  if (open == std::string_view::npos || !label.ends_with(')')) return std::string(label);
  std::string_view where = label.substr(open + 2, label.size() - open - 3);
  size_t slash = where.rfind('/');
  if (slash == std::string_view::npos || slash == 0) return std::string(label);
  size_t cut = where.rfind('/', slash - 1);
  if (cut == std::string_view::npos || cut == 0) return std::string(label);  // two components or fewer
  std::string out(label.substr(0, open + 2));
  out.append(where.substr(cut + 1)).push_back(')');
  return out;
}

std::string RenderSummary(const StackTree& tree, const std::vector<RankStack>& ranks, size_t max_lines) {
  size_t with_stack = static_cast<size_t>(std::count_if(ranks.begin(), ranks.end(), HasStack));
  std::string out = "stacks of " + std::to_string(ranks.size()) +
                    (ranks.size() == 1 ? " rank (" : " ranks (") + std::to_string(with_stack) +
                    " with a stack)\n";
  if (tree.ranks().empty()) return out;
  std::vector<std::string> tree_lines = TreePrinter(tree, true).Print();
  std::vector<std::string> odd_lines = OddLines(tree, ranks);
  size_t room = max_lines == 0 ? std::string::npos : std::max<size_t>(max_lines, 3) - 1;  // after the header
  if (tree_lines.size() + odd_lines.size() <= room) {
    return out + Join(tree_lines, 0, tree_lines.size()) + Join(odd_lines, 0, odd_lines.size());
  }
  // Over the limit: one line says so; the tree keeps at least half of the rest, the odd ranks what the
  // tree leaves.
  room -= 1;
  size_t odd_take =
      std::min(odd_lines.size(), std::max(room - room / 2, room - std::min(room, tree_lines.size())));
  size_t tree_take = std::min(tree_lines.size(), room - odd_take);
  odd_take = std::min(odd_lines.size(), room - tree_take);
  size_t left = tree_lines.size() - tree_take + odd_lines.size() - odd_take;
  return out + Join(tree_lines, 0, tree_take) + Join(odd_lines, 0, odd_take) + "... " + std::to_string(left) +
         " more lines: the full dump has the rest\n";
}

std::string RenderFullDump(const StackTree& tree, const std::vector<RankStack>& ranks) {
  std::vector<const RankStack*> order;
  for (const RankStack& r : ranks) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  std::string out;
  for (const RankStack* r : order) {
    out += "== rank " + std::to_string(r->rank) + " (" + Where(*r) +
           (r->mechanism.empty() ? "" : ", " + r->mechanism) + ") ==\n";
    if (!r->error.empty()) {
      out += "no stack: " + r->error + "\n";
    } else if (!HasStack(*r)) {
      out += "no thread in the dump\n";
    }
    for (const ThreadStack& t : r->error.empty() ? r->threads : std::vector<ThreadStack>{}) {
      out += "thread" + (t.name.empty() ? "" : " " + t.name) + (t.current ? " (current)" : "") + ":\n";
      for (size_t i = t.frames.size(); i-- > 0;) {
        out += "  #" + std::to_string(t.frames.size() - 1 - i) + " " + t.frames[i] + "\n";
      }
    }
    out += "\n";
  }
  out += "== merged tree of " + SetTag(tree.ranks(), std::string::npos) + " ==\n";
  std::vector<std::string> lines = TreePrinter(tree, false).Print();
  return out + Join(lines, 0, lines.size());
}

std::string RenderFullDump(const std::vector<RankStack>& ranks) {
  return RenderFullDump(StackTree::Build(ranks), ranks);
}

}  // namespace distrun
