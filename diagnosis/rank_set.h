#pragma once
// A set of ranks kept as sorted, disjoint, non-adjacent ranges, rendered as "0-2,4,6-15". The stack merge
// (stack_tree.h) adds ranks mostly in ascending order, which appends or extends the last range in O(1);
// an out-of-order add inserts in the middle.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

class RankSet {
 public:
  struct Range {
    int lo = 0;
    int hi = 0;  // inclusive
    bool operator==(const Range&) const = default;
  };

  RankSet() = default;

  void Add(int rank) { AddRange(rank, rank); }
  // Adds lo..hi (inclusive); nothing when hi < lo.
  void AddRange(int lo, int hi);
  // The union with `other`.
  void Merge(const RankSet& other);

  bool Contains(int rank) const;
  bool empty() const { return ranges_.empty(); }
  // How many ranks.
  size_t size() const { return size_; }
  // The lowest rank; the set must not be empty.
  int first() const { return ranges_.front().lo; }
  const std::vector<Range>& ranges() const { return ranges_; }

  // "0-2,4,6-15"; empty for an empty set. Past `max_chars` it ends at a whole item, followed by ",...".
  std::string ToString(size_t max_chars = std::string::npos) const;
  // The inverse of ToString ("0-2,4", spaces allowed around items); nullopt for anything else.
  static std::optional<RankSet> Parse(std::string_view text);

  bool operator==(const RankSet& other) const { return ranges_ == other.ranges_; }

 private:
  std::vector<Range> ranges_;
  size_t size_ = 0;
};

}  // namespace distrun
