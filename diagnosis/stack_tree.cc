#include "diagnosis/stack_tree.h"

#include <algorithm>
#include <map>

namespace distrun {
namespace {

// Calls fn(rank) for each rank of `set`, ascending.
template <typename Fn>
void ForEachRank(const RankSet& set, Fn fn) {
  for (const RankSet::Range& r : set.ranges()) {
    for (int64_t rank = r.lo; rank <= r.hi; ++rank) fn(static_cast<int>(rank));
  }
}

}  // namespace

std::string NoStackLabel(const std::string& error) {
  return error.empty() ? std::string(kEmptyStack) : "<no stack: " + error + ">";
}

std::string LeafFrame(const RankStack& rank) {
  if (!rank.error.empty()) return NoStackLabel(rank.error);
  const ThreadStack* pick = nullptr;
  for (const ThreadStack& t : rank.threads) {
    if (t.frames.empty()) continue;
    if (t.current) return t.frames.back();
    if (!pick) pick = &t;
  }
  return pick ? pick->frames.back() : std::string(kEmptyStack);
}

StackTree::StackTree() { nodes_.emplace_back(); }

StackTree StackTree::Build(const std::vector<RankStack>& ranks) {
  std::vector<const RankStack*> order;
  order.reserve(ranks.size());
  for (const RankStack& r : ranks) order.push_back(&r);
  std::stable_sort(order.begin(), order.end(),
                   [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  StackTree tree;
  for (const RankStack* r : order) tree.Add(*r);
  return tree;
}

const std::string& StackTree::label(int id) const {
  static const std::string kNone;
  int frame = node(id).frame;
  return frame < 0 ? kNone : labels_[static_cast<size_t>(frame)];
}

int StackTree::Intern(const std::string& label) {
  auto [it, added] = label_ids_.try_emplace(label, static_cast<int>(labels_.size()));
  if (added) labels_.push_back(label);
  return it->second;
}

int StackTree::Child(int parent, int frame) {
  uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(parent)) << 32) | static_cast<uint32_t>(frame);
  auto [it, added] = child_of_.try_emplace(key, static_cast<int>(nodes_.size()));
  if (added) {
    StackNode n;
    n.frame = frame;
    n.parent = parent;
    nodes_.push_back(std::move(n));
    nodes_[static_cast<size_t>(parent)].children.push_back(it->second);
  }
  return it->second;
}

void StackTree::AddPath(int rank, const std::vector<std::string>& frames) {
  int at = kRoot;
  for (const std::string& f : frames) {
    at = Child(at, Intern(f));
    nodes_[static_cast<size_t>(at)].ranks.Add(rank);
  }
  nodes_[static_cast<size_t>(at)].ends.Add(rank);
}

void StackTree::Add(const RankStack& rank) {
  nodes_[kRoot].ranks.Add(rank.rank);
  bool any = false;
  if (rank.error.empty()) {
    for (const ThreadStack& t : rank.threads) {
      if (t.frames.empty()) continue;
      AddPath(rank.rank, t.frames);
      any = true;
    }
  }
  if (!any) AddPath(rank.rank, {NoStackLabel(rank.error)});
}

void StackTree::Merge(const StackTree& other) {
  // Nodes are stored after their parents, so one pass in storage order finds every parent mapped.
  std::vector<int> mapped(other.nodes_.size(), kRoot);
  for (size_t i = 0; i < other.nodes_.size(); ++i) {
    const StackNode& theirs = other.nodes_[i];
    if (i != kRoot) {
      mapped[i] = Child(mapped[static_cast<size_t>(theirs.parent)],
                        Intern(other.labels_[static_cast<size_t>(theirs.frame)]));
    }
    StackNode& ours = nodes_[static_cast<size_t>(mapped[i])];
    ours.ranks.Merge(theirs.ranks);
    ours.ends.Merge(theirs.ends);
  }
}

std::vector<EquivalenceClass> StackTree::EquivalenceClasses() const {
  // Each rank's signature: the nodes where its threads end, ascending since nodes are visited in order.
  std::unordered_map<int, std::vector<int>> ends_of;
  ends_of.reserve(ranks().size());
  for (size_t i = 1; i < nodes_.size(); ++i) {
    ForEachRank(nodes_[i].ends, [&](int rank) { ends_of[rank].push_back(static_cast<int>(i)); });
  }
  std::map<std::vector<int>, size_t> index;
  std::vector<EquivalenceClass> classes;
  ForEachRank(ranks(), [&](int rank) {
    std::vector<int>& ends = ends_of[rank];
    auto [it, added] = index.try_emplace(ends, classes.size());
    if (added) classes.push_back({{}, ends});
    classes[it->second].ranks.Add(rank);
  });
  std::stable_sort(classes.begin(), classes.end(), [](const EquivalenceClass& a, const EquivalenceClass& b) {
    return a.ranks.size() != b.ranks.size() ? a.ranks.size() < b.ranks.size()
                                            : a.ranks.first() < b.ranks.first();
  });
  return classes;
}

std::vector<OddClass> OddRanks(const StackTree& tree, const std::vector<RankStack>& ranks) {
  std::vector<EquivalenceClass> classes = tree.EquivalenceClasses();
  if (classes.empty()) return {};
  // The majority: the largest class; of equal ones, the one holding the lowest rank.
  size_t majority = classes.size() - 1;
  for (size_t i = classes.size() - 1; i-- > 0;) {
    if (classes[i].ranks.size() != classes[majority].ranks.size()) break;
    majority = i;
  }
  std::map<int, const RankStack*> by_rank;
  for (const RankStack& r : ranks) by_rank.try_emplace(r.rank, &r);
  std::vector<OddClass> out;
  for (size_t i = 0; i < classes.size(); ++i) {
    if (i == majority) continue;
    OddClass odd{classes[i].ranks, {}};
    ForEachRank(odd.ranks, [&](int rank) {
      auto it = by_rank.find(rank);
      if (it != by_rank.end()) odd.members.push_back(it->second);
    });
    out.push_back(std::move(odd));
  }
  return out;
}

}  // namespace distrun
