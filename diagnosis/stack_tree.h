#pragma once
// The merged picture of a hung job's stacks, as LLNL's STAT draws it: a prefix tree of call paths, root
// first, whose every node carries the set of ranks with at least one thread through it. Equal call sites
// share a node (frame labels are interned to ids), so the path that most ranks took and the odd ones
// appear side by side. A rank that gave no stack is a leaf of its own under the root, labelled with why.
//
// Equivalence classes (STAT's process equivalence classes): ranks whose threads end at the same set of
// nodes; every rank is in exactly one. The majority class is the largest; the others hold the odd ranks.
// Pure data: no I/O.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "diagnosis/rank_set.h"
#include "diagnosis/stack_parse.h"

namespace distrun {

// One rank's dump, with where it runs, for naming it.
struct RankStack {
  int rank = 0;
  std::string host;
  int pid = 0;
  std::string gpu;
  std::string mechanism;  // how the stack was taken, in the caller's words: "python", "native"
  std::string error;      // non-empty: no stack, and why, in one line
  std::vector<ThreadStack> threads;
};

// The leaf of a rank without a stack: "<no stack: why>", or kEmptyStack when it gave no thread and no
// reason.
std::string NoStackLabel(const std::string& error);
inline constexpr char kEmptyStack[] = "<empty stack>";

// What a rank is doing, in one frame: the innermost frame of its current thread (else of its first thread
// with frames), or the leaf label of a rank without a stack.
std::string LeafFrame(const RankStack& rank);

struct StackNode {
  int frame = -1;             // label id (StackTree::label); -1 at the root
  int parent = -1;            // -1 at the root
  RankSet ranks;              // ranks with a thread through this node
  RankSet ends;               // ranks with a thread whose innermost frame is this node
  std::vector<int> children;  // node ids, in the order they were first reached
};

struct EquivalenceClass {
  RankSet ranks;
  std::vector<int> ends;  // the nodes where the threads of each of its ranks end, ascending
};

class StackTree {
 public:
  static constexpr int kRoot = 0;

  StackTree();
  // Every rank of `ranks`, in ascending rank order (the cheap order for rank sets).
  static StackTree Build(const std::vector<RankStack>& ranks);

  // One rank: each thread with frames is a path from the root; a rank without any is a leaf of its own.
  // Ranks may come in any order; adding the same rank twice adds its threads to it.
  void Add(const RankStack& rank);
  // The union with a tree built apart (from other ranks, say), node by node.
  void Merge(const StackTree& other);

  size_t size() const { return nodes_.size(); }  // nodes, the root included
  const StackNode& node(int id) const { return nodes_[static_cast<size_t>(id)]; }
  // The frame label of a node; empty for the root.
  const std::string& label(int id) const;
  // Every rank in the tree.
  const RankSet& ranks() const { return nodes_[kRoot].ranks; }

  // Smallest class first; equal sizes in the order of their lowest rank.
  std::vector<EquivalenceClass> EquivalenceClasses() const;

 private:
  int Intern(const std::string& label);
  int Child(int parent, int frame);
  void AddPath(int rank, const std::vector<std::string>& frames);

  std::vector<std::string> labels_;
  std::unordered_map<std::string, int> label_ids_;
  std::vector<StackNode> nodes_;
  std::unordered_map<uint64_t, int> child_of_;  // (parent << 32 | frame) -> child
};

// A class outside the majority, with the dumps of its ranks (ascending; ranks the tree has but `ranks`
// lacks are left out).
struct OddClass {
  RankSet ranks;
  std::vector<const RankStack*> members;
};
// The classes of `tree` other than the majority (the largest; of equal ones, that with the lowest rank),
// smallest first. The pointers point into `ranks`.
std::vector<OddClass> OddRanks(const StackTree& tree, const std::vector<RankStack>& ranks);

}  // namespace distrun
