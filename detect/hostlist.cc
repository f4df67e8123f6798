#include "detect/hostlist.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <utility>

#include "detect/errors.h"

namespace distrun {
namespace {

// Slurm's own limits (hostlist.c): MAX_RANGE hosts in one range element, MAX_RANGES elements in one
// bracket, MAX_PREFIX_CNT hosts in a bracket that another bracket follows.
constexpr uint64_t kMaxRange = 65536;
constexpr size_t kMaxRanges = 65536;
constexpr uint64_t kMaxPrefixCount = 65536;
// Longer values and tokens are cut in messages so that an error stays one readable line.
constexpr size_t kShownChars = 160;
constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

// One line, control characters escaped: values may hold newlines (a separator since Slurm 23.02).
std::string Escaped(std::string_view s) {
  std::string out;
  size_t n = std::min(s.size(), kShownChars);
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > n) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string Shown(std::string_view s) { return "'" + Escaped(s) + "'"; }

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > kSaturated - b ? kSaturated : a + b; }
uint64_t SatMul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

std::string CountText(uint64_t n) { return n == kSaturated ? "more than 2^64" : std::to_string(n); }

bool IsSeparator(char c) { return c == ',' || c == ' ' || c == '\t' || c == '\n'; }
// What strtoul skips before a number in the C locale.
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

// Slurm's "%0*lu": at least `width` characters, zero-padded.
std::string FormatNumber(uint64_t v, size_t width) {
  std::string digits = std::to_string(v);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  return digits;
}

// Bytes that FormatNumber writes for all of lo..hi, counted per band of equal digit count.
uint64_t FormattedBytes(uint64_t lo, uint64_t hi, size_t width) {
  uint64_t total = 0;
  uint64_t band_lo = 0;
  uint64_t band_hi = 9;
  for (size_t digits = 1; digits <= 20; ++digits) {
    uint64_t a = std::max(lo, band_lo);
    uint64_t b = std::min(hi, band_hi);
    if (a <= b) total = SatAdd(total, SatMul(b - a + 1, std::max(width, digits)));
    if (band_hi == kSaturated) break;
    band_lo = band_hi + 1;
    band_hi = band_hi > kSaturated / 10 ? kSaturated : band_hi * 10 + 9;
  }
  return total;
}

struct Range {
  uint64_t lo = 0;
  uint64_t hi = 0;
  size_t width = 0;  // of LO's text, as Slurm pads
};

struct Group {
  std::vector<Range> ranges;
  uint64_t count = 0;
  uint64_t bytes = 0;  // formatted digits of all its values
};

// A token is literals[0] group[0] literals[1] ... group[m-1] literals[m]; m == 0 is a literal host.
struct TokenPlan {
  std::string_view text;
  std::vector<std::string_view> literals;
  std::vector<Group> groups;
  uint64_t count = 1;
  uint64_t bytes = 0;
};

enum class NumberStatus { kOk, kBad, kTooLarge };

// strtoul's decimal form (leading white space and '+' allowed), but the whole text must be the number
// and it must fit 64 bits.
NumberStatus ParseNumber(std::string_view text, uint64_t& value) {
  size_t i = 0;
  while (i < text.size() && IsSpace(text[i])) ++i;
  if (i < text.size() && text[i] == '+') ++i;
  if (i == text.size()) return NumberStatus::kBad;
  value = 0;
  bool too_large = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c < '0' || c > '9') return NumberStatus::kBad;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (kSaturated - digit) / 10) too_large = true;
    if (!too_large) value = value * 10 + digit;
  }
  return too_large ? NumberStatus::kTooLarge : NumberStatus::kOk;
}

// s.find(c, from) for non-decreasing `from`, remembering the last answer so that a long list of tokens
// without brackets is scanned once, not once per token.
struct NextOf {
  char c;
  size_t searched_from = std::string_view::npos;
  size_t found = std::string_view::npos;

  size_t From(std::string_view s, size_t from) {
    if (searched_from == std::string_view::npos || from < searched_from ||
        (found != std::string_view::npos && from > found)) {
      searched_from = from;
      found = s.find(c, from);
    }
    return found;
  }
};

class HostlistParser {
 public:
  HostlistParser(std::string_view what, std::string_view value) : what_(what), value_(value) {}

  std::vector<std::string> Expand() {
    if (value_.find('\0') != std::string_view::npos) {
      Fail("it contains a NUL byte; host names are plain text");
    }
    std::vector<TokenPlan> plans;
    uint64_t hosts = 0;
    uint64_t bytes = 0;
    for (std::string_view token : Tokenize()) {
      plans.push_back(Plan(token));
      const TokenPlan& plan = plans.back();
      hosts = SatAdd(hosts, plan.count);
      bytes = SatAdd(bytes, plan.bytes);
      if (hosts > kMaxHostlistHosts) {
        Fail("it expands to " + CountText(hosts) + " hosts (" + Shown(token) + " alone gives " +
             CountText(plan.count) + "), more than distrun's limit of " + std::to_string(kMaxHostlistHosts) +
             " hosts in one hostlist; no real allocation is that large, so the value is probably corrupt");
      }
      if (bytes > kMaxHostlistBytes) {
        Fail("its host names add up to " + CountText(bytes) + " bytes, more than distrun's limit of " +
             std::to_string(kMaxHostlistBytes) + " bytes for one hostlist; the value is probably corrupt");
      }
    }
    std::vector<std::string> out;
    out.reserve(static_cast<size_t>(hosts));
    for (const TokenPlan& plan : plans) Emit(plan, out);
    return out;
  }

 private:
  [[noreturn]] void Fail(const std::string& detail) const {
    throw UsageError(std::string(what_) + "=" + Shown(value_) + " is not a valid hostlist: " + detail);
  }

  // Slurm's _next_tok: a separator ends the token unless a '[' before it pairs with the first ']' after
  // it (searched from the last pair's end), which is how "n[1,3]" stays one token. Unbalanced forms
  // such as "a]b[1,2]" split where Slurm splits them.
  std::vector<std::string_view> Tokenize() const {
    std::vector<std::string_view> tokens;
    const std::string_view s = value_;
    const size_t n = s.size();
    NextOf next_open{'['};
    NextOf next_close{']'};
    size_t pos = 0;
    while (true) {
      while (pos < n && IsSeparator(s[pos])) ++pos;
      if (pos == n) break;
      const size_t start = pos;
      size_t parse = pos;
      size_t end = pos;
      bool extended = true;
      while (extended) {
        extended = false;
        while (end < n && !IsSeparator(s[end])) ++end;
        while (true) {
          size_t open = next_open.From(s, parse);
          if (open == std::string_view::npos || open > end) break;
          size_t close = next_close.From(s, parse);
          if (close == std::string_view::npos || close < open) break;
          if (close < end) {
            parse = close + 1;
            continue;
          }
          end = close;
          extended = true;
          break;
        }
      }
      tokens.push_back(s.substr(start, end - start));
      pos = end;
    }
    return tokens;
  }

  // The token's last '[' and the first ']' after it hold the innermost range list; the text after is
  // a suffix. The prefix is peeled from the right like Slurm's _push_range_list: its last '[' with the
  // last ']' after that '[' is a group, until no such pair is left.
  TokenPlan Plan(std::string_view token) const {
    TokenPlan plan;
    plan.text = token;
    size_t open = token.rfind('[');
    if (open == std::string_view::npos) {
      plan.literals.push_back(token);
      plan.bytes = token.size();
      return plan;
    }
    size_t close = token.find(']', open);
    if (close == std::string_view::npos) {
      Fail("the '[' at offset " + std::to_string(open) + " of " + Shown(token) + " is never closed; write " +
           Shown(std::string(token) + "]") + " or remove the '['");
    }
    std::vector<std::string_view> literals{token.substr(close + 1)};
    std::vector<Group> groups{ParseGroup(token, open + 1, close, /*last=*/true)};
    size_t end = open;
    while (true) {
      std::string_view before = token.substr(0, end);
      size_t pb = before.rfind('[');
      if (pb == std::string_view::npos) break;
      size_t qb = before.rfind(']');
      if (qb == std::string_view::npos || qb < pb) break;
      literals.push_back(token.substr(qb + 1, end - qb - 1));
      groups.push_back(ParseGroup(token, pb + 1, qb, /*last=*/false));
      end = pb;
    }
    literals.push_back(token.substr(0, end));
    std::reverse(literals.begin(), literals.end());
    std::reverse(groups.begin(), groups.end());
    plan.literals = std::move(literals);
    plan.groups = std::move(groups);

    uint64_t literal_bytes = 0;
    for (std::string_view lit : plan.literals) literal_bytes += lit.size();
    for (const Group& g : plan.groups) plan.count = SatMul(plan.count, g.count);
    plan.bytes = SatMul(plan.count, literal_bytes);
    for (const Group& g : plan.groups) {
      // Each value of g appears once per combination of the other groups.
      plan.bytes = SatAdd(plan.bytes, SatMul(plan.count / g.count, g.bytes));
    }
    if (plan.count == kSaturated) plan.bytes = kSaturated;
    return plan;
  }

  Group ParseGroup(std::string_view token, size_t begin, size_t end, bool last) const {
    Group group;
    size_t pos = begin;
    while (true) {
      size_t comma = token.substr(0, end).find(',', pos);
      size_t elem_end = comma == std::string_view::npos ? end : comma;
      if (group.ranges.size() == kMaxRanges) {
        Fail("the bracket at offset " + std::to_string(begin - 1) + " of " + Shown(token) +
             " has more than " + std::to_string(kMaxRanges) +
             " comma-separated ranges, Slurm's limit; merge them into LO-HI ranges");
      }
      Range r = ParseRange(token, pos, elem_end);
      group.ranges.push_back(r);
      group.count += r.hi - r.lo + 1;
      group.bytes = SatAdd(group.bytes, FormattedBytes(r.lo, r.hi, r.width));
      if (elem_end == end) break;
      pos = elem_end + 1;
    }
    if (!last && group.count > kMaxPrefixCount) {
      Fail("the bracket [" + Escaped(token.substr(begin, end - begin)) + "] in " + Shown(token) + " holds " +
           std::to_string(group.count) + " numbers; Slurm allows at most " + std::to_string(kMaxPrefixCount) +
           " in a bracket that another bracket follows");
    }
    return group;
  }

  Range ParseRange(std::string_view token, size_t begin, size_t end) const {
    std::string_view elem = token.substr(begin, end - begin);
    auto with = [&](std::string_view replacement) {
      return std::string(token.substr(0, begin)) + std::string(replacement) + std::string(token.substr(end));
    };
    if (begin == end && token[begin - 1] == '[' && token[end] == ']') {
      Fail("empty brackets at offset " + std::to_string(begin - 1) + " of " + Shown(token) +
           "; put numbers inside, such as n[1-3], or drop the brackets");
    }
    if (elem.empty()) {
      Fail("empty range at offset " + std::to_string(begin) + " of " + Shown(token) +
           "; each comma-separated entry must be N or LO-HI, such as n[1,3-5]");
    }
    size_t dash = elem.find('-');
    std::string_view lo_text = elem.substr(0, dash);
    std::string_view hi_text = dash == std::string_view::npos ? std::string_view() : elem.substr(dash + 1);
    if (lo_text.empty()) {
      Fail("range " + Shown(elem) + " in " + Shown(token) +
           " has no low bound (numbers cannot be negative); write LO-HI, such as n[1-3]");
    }
    if (!hi_text.empty() && hi_text.front() == '-') {
      Fail("range " + Shown(elem) + " in " + Shown(token) +
           " has a negative high bound; write LO-HI with non-negative numbers, such as n[1-3]");
    }
    Range r;
    r.width = lo_text.size();
    NumberStatus lo_status = ParseNumber(lo_text, r.lo);
    NumberStatus hi_status = NumberStatus::kOk;
    if (hi_text.empty()) {
      r.hi = r.lo;
    } else {
      hi_status = ParseNumber(hi_text, r.hi);
    }
    if (lo_status == NumberStatus::kBad || hi_status == NumberStatus::kBad) {
      if (elem.find(':') != std::string_view::npos) {
        Fail("range " + Shown(elem) + " in " + Shown(token) +
             " has a step; ':' is job-array syntax, hostlists have none; list the numbers, such as n[1,3,5]");
      }
      Fail("range " + Shown(elem) + " in " + Shown(token) +
           " is not N, LO-HI or LO- with decimal numbers; write e.g. n[1-3] or n[1,3,5]");
    }
    if (lo_status == NumberStatus::kTooLarge || hi_status == NumberStatus::kTooLarge) {
      Fail("range " + Shown(elem) + " in " + Shown(token) + " has a number too large for 64 bits");
    }
    if (r.lo > r.hi) {
      std::string swapped = FormatNumber(r.hi, r.width) + "-" + FormatNumber(r.lo, r.width);
      Fail("range " + Escaped(elem) + " in " + Shown(token) + " runs backwards; write " +
           Escaped(with(swapped)));
    }
    if (r.hi - r.lo >= kMaxRange) {
      std::string detail = "range " + Shown(elem) + " in " + Shown(token) + " holds " +
                           CountText(SatAdd(r.hi - r.lo, 1)) + " hosts, more than Slurm's limit of " +
                           std::to_string(kMaxRange) + " in one range; split it";
      uint64_t split = r.lo + kMaxRange;
      if (r.hi - split < kMaxRange) {
        std::string first = FormatNumber(r.lo, r.width) + "-" + FormatNumber(split - 1, r.width);
        std::string rest = FormatNumber(split, r.width);
        if (r.hi > split) rest += "-" + FormatNumber(r.hi, r.width);
        detail += ", e.g. " + Escaped(with(first + "," + rest));
      }
      Fail(detail);
    }
    return r;
  }

  // Slurm's order: the groups of the prefix from the rightmost (outermost loop) to the leftmost, then
  // the token's last group innermost. With two groups that is the natural order.
  static void Emit(const TokenPlan& plan, std::vector<std::string>& out) {
    const size_t m = plan.groups.size();
    if (m == 0) {
      out.emplace_back(plan.text);
      return;
    }
    std::vector<size_t> order;
    for (size_t g = m - 1; g-- > 0;) order.push_back(g);
    order.push_back(m - 1);
    std::vector<std::string> values(m);
    EmitLevel(plan, order, 0, values, out);
  }

  static void EmitLevel(const TokenPlan& plan, const std::vector<size_t>& order, size_t depth,
                        std::vector<std::string>& values, std::vector<std::string>& out) {
    if (depth == order.size()) {
      std::string host(plan.literals[0]);
      for (size_t g = 0; g < values.size(); ++g) {
        host += values[g];
        host += plan.literals[g + 1];
      }
      out.push_back(std::move(host));
      return;
    }
    const size_t g = order[depth];
    for (const Range& r : plan.groups[g].ranges) {
      for (uint64_t k = 0; k <= r.hi - r.lo; ++k) {
        values[g] = FormatNumber(r.lo + k, r.width);
        EmitLevel(plan, order, depth + 1, values, out);
      }
    }
  }

  std::string_view what_;
  std::string_view value_;
};

class CountParser {
 public:
  CountParser(std::string_view what, std::string_view value) : what_(what), value_(value) {}

  std::vector<int> Expand() {
    if (value_.empty()) Fail("it is empty");
    std::vector<int> out;
    size_t total = 0;
    size_t pos = 0;
    for (size_t index = 1;; ++index) {
      size_t comma = value_.find(',', pos);
      std::string_view field = value_.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
      auto [count, repeat] = ParseField(field, index);
      if (repeat > kMaxTaskCounts - total) {
        Fail("it expands to more than " + std::to_string(kMaxTaskCounts) +
             " entries, distrun's limit; no real allocation has that many nodes, so the value is probably "
             "corrupt");
      }
      total += repeat;
      out.insert(out.end(), repeat, count);
      if (comma == std::string_view::npos) break;
      pos = comma + 1;
    }
    return out;
  }

 private:
  [[noreturn]] void Fail(const std::string& detail) const {
    throw UsageError(std::string(what_) + "=" + Shown(value_) + " is not a valid count list: " + detail +
                     "; Slurm writes counts as N or N(xM) separated by commas, such as 2(x3),1");
  }

  // Digits at `pos` as an int; returns the position after them.
  size_t ParseInt(std::string_view field, size_t pos, size_t index, int& value) const {
    size_t end = pos;
    while (end < field.size() && field[end] >= '0' && field[end] <= '9') ++end;
    if (end == pos) return pos;
    uint64_t v = 0;
    if (ParseNumber(field.substr(pos, end - pos), v) != NumberStatus::kOk ||
        v > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
      Fail("field " + std::to_string(index) + " " + Shown(field) + " has a number too large for an int");
    }
    value = static_cast<int>(v);
    return end;
  }

  std::pair<int, size_t> ParseField(std::string_view field, size_t index) const {
    std::string where = "field " + std::to_string(index) + " " + Shown(field);
    if (field.empty()) Fail("field " + std::to_string(index) + " is empty");
    int count = 0;
    size_t pos = ParseInt(field, 0, index, count);
    if (pos == 0) {
      if (field.front() == '(') Fail(where + " has no count before '('");
      Fail(where + " does not start with a decimal count");
    }
    if (pos == field.size()) return {count, 1};
    if (field[pos] != '(') Fail(where + " has " + Shown(field.substr(pos)) + " after the count");
    if (pos + 1 >= field.size() || field[pos + 1] != 'x') {
      int guess = 0;
      size_t after = ParseInt(field, pos + 1, index, guess);
      std::string repeat = after > pos + 1 ? std::to_string(guess) : "M";
      Fail(where + " lacks the 'x'; write " + std::to_string(count) + "(x" + repeat + ")");
    }
    int repeat = 0;
    size_t after = ParseInt(field, pos + 2, index, repeat);
    if (after == pos + 2) Fail(where + " has no repeat count after '(x'");
    if (after == field.size()) Fail(where + " is missing the closing ')'");
    if (field[after] != ')') Fail(where + " has " + Shown(field.substr(after)) + " where ')' should be");
    if (after + 1 != field.size()) Fail(where + " has " + Shown(field.substr(after + 1)) + " after the ')'");
    if (repeat == 0) Fail(where + " repeats its count 0 times; the repeat count must be at least 1");
    return {count, static_cast<size_t>(repeat)};
  }

  std::string_view what_;
  std::string_view value_;
};

}  // namespace

std::vector<std::string> ExpandHostlist(std::string_view what, std::string_view hostlist) {
  return HostlistParser(what, hostlist).Expand();
}

std::vector<int> ExpandTaskCounts(std::string_view what, std::string_view counts) {
  return CountParser(what, counts).Expand();
}

}  // namespace distrun
