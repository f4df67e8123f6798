#include "diagnosis/rank_set.h"

#include <algorithm>
#include <charconv>
#include <cstdint>

namespace distrun {
namespace {

int64_t Width(const RankSet::Range& r) { return int64_t{r.hi} - r.lo + 1; }

}  // namespace

void RankSet::AddRange(int lo, int hi) {
  if (hi < lo) return;
  // The usual case: at or past the end of the last range.
  if (ranges_.empty() || int64_t{lo} > int64_t{ranges_.back().hi} + 1) {
    ranges_.push_back({lo, hi});
    size_ += static_cast<size_t>(Width(ranges_.back()));
    return;
  }
  if (lo >= ranges_.back().lo) {
    if (hi > ranges_.back().hi) {
      size_ += static_cast<size_t>(int64_t{hi} - ranges_.back().hi);
      ranges_.back().hi = hi;
    }
    return;
  }
  // Out of order: every range that overlaps or touches lo..hi is folded into one.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                                [](const Range& r, int v) { return int64_t{r.hi} + 1 < v; });
  auto last = first;
  Range merged{lo, hi};
  while (last != ranges_.end() && int64_t{last->lo} <= int64_t{hi} + 1) {
    merged.lo = std::min(merged.lo, last->lo);
    merged.hi = std::max(merged.hi, last->hi);
    size_ -= static_cast<size_t>(Width(*last));
    ++last;
  }
  size_ += static_cast<size_t>(Width(merged));
  if (first == last) {
    ranges_.insert(first, merged);
  } else {
    *first = merged;
    ranges_.erase(first + 1, last);
  }
}

void RankSet::Merge(const RankSet& other) {
  if (other.empty()) return;
  if (empty() || int64_t{other.first()} > int64_t{ranges_.back().hi} + 1) {
    ranges_.insert(ranges_.end(), other.ranges_.begin(), other.ranges_.end());
    size_ += other.size_;
    return;
  }
  // A linear merge of two sorted lists, folding overlapping and adjacent ranges.
  std::vector<Range> out;
  out.reserve(ranges_.size() + other.ranges_.size());
  size_t i = 0, j = 0;
  size_t size = 0;
  while (i < ranges_.size() || j < other.ranges_.size()) {
    const Range& next =
        (j == other.ranges_.size() || (i < ranges_.size() && ranges_[i].lo <= other.ranges_[j].lo))
            ? ranges_[i++]
            : other.ranges_[j++];
    if (!out.empty() && int64_t{next.lo} <= int64_t{out.back().hi} + 1) {
      if (next.hi > out.back().hi) {
        size += static_cast<size_t>(int64_t{next.hi} - out.back().hi);
        out.back().hi = next.hi;
      }
    } else {
      out.push_back(next);
      size += static_cast<size_t>(Width(next));
    }
  }
  ranges_ = std::move(out);
  size_ = size;
}

bool RankSet::Contains(int rank) const {
  auto it =
      std::lower_bound(ranges_.begin(), ranges_.end(), rank, [](const Range& r, int v) { return r.hi < v; });
  return it != ranges_.end() && it->lo <= rank;
}

std::string RankSet::ToString(size_t max_chars) const {
  std::string out;
  for (const Range& r : ranges_) {
    std::string item = std::to_string(r.lo);
    if (r.hi != r.lo) item += "-" + std::to_string(r.hi);
    if (!out.empty() && out.size() + 1 + item.size() > max_chars) return out + ",...";
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

std::optional<RankSet> RankSet::Parse(std::string_view text) {
  auto trim = [](std::string_view s) {
    while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
    while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
    return s;
  };
  auto number = [](std::string_view s, int* out) {
    if (s.empty()) return false;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  RankSet set;
  if (trim(text).empty()) return set;
  while (true) {
    size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    // A dash past the first character separates a range, so "-3" stays one (negative) number.
    size_t dash = item.find('-', 1);
    int lo = 0, hi = 0;
    if (dash == std::string_view::npos) {
      if (!number(item, &lo)) return std::nullopt;
      hi = lo;
    } else if (!number(trim(item.substr(0, dash)), &lo) || !number(trim(item.substr(dash + 1)), &hi) ||
               hi < lo) {
      return std::nullopt;
    }
    set.AddRange(lo, hi);
    if (comma == std::string_view::npos) return set;
    text.remove_prefix(comma + 1);
  }
}

}  // namespace distrun
