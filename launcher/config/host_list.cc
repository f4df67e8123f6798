#include "launcher/config/host_list.h"

#include <cctype>
#include <fstream>
#include <sstream>

#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr int kMaxSlots = 4096;

[[noreturn]] void Bad(const std::string& where, std::string_view item, const std::string& fix) {
  throw UsageError(where + ": '" + std::string(item) + "' " + fix);
}

int Slots(const std::string& where, std::string_view item, std::string_view text) {
  int n = 0;
  bool digits = !text.empty() && text.size() <= 5;
  for (char c : text) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) n = std::stoi(std::string(text));
  if (!digits || n < 1 || n > kMaxSlots) {
    Bad(where, item, "has no valid slot count (a number from 1 to " + std::to_string(kMaxSlots) + ")");
  }
  return n;
}

bool ValidHostName(std::string_view host) {
  if (host.empty() || host.size() > 253 || host.front() == '-') return false;
  for (char c : host) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' || c == ':';
    if (!ok) return false;
  }
  return true;
}

// "[user@]host", "[user@]host:N", "[user@][v6]:N": the part of a line or -H item before any key=value.
HostEntry ParseTarget(const std::string& where, std::string_view item, bool colon_slots) {
  HostEntry e;
  e.where = where;
  std::string_view rest = item;
  if (size_t at = rest.find('@'); at != std::string_view::npos) {
    e.user = std::string(rest.substr(0, at));
    rest.remove_prefix(at + 1);
    if (e.user.empty()) Bad(where, item, "has an empty user name before '@'");
  }
  std::string_view slots;
  if (rest.starts_with('[')) {  // [v6] or [v6]:N
    size_t close = rest.find(']');
    if (close == std::string_view::npos) Bad(where, item, "has no ']' after its IPv6 address");
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (!colon_slots || !after.starts_with(':')) Bad(where, item, "has something after its address");
      slots = after.substr(1);
    }
    rest = rest.substr(1, close - 1);
  } else if (size_t colon = rest.rfind(':'); colon_slots && colon != std::string_view::npos) {
    if (rest.find(':') != colon) Bad(where, item, "looks like an IPv6 address: write it as [ADDRESS]:SLOTS");
    slots = rest.substr(colon + 1);
    rest = rest.substr(0, colon);
  }
  if (!ValidHostName(rest)) Bad(where, item, "is not a host name or address");
  e.host = std::string(rest);
  if (!slots.empty() || (colon_slots && item.ends_with(':'))) e.slots = Slots(where, item, slots);
  return e;
}

// Joins repeated hosts: a host named more than once gets the sum of its slots, a bare name counting one.
std::vector<HostEntry> Merge(std::vector<HostEntry> entries) {
  std::vector<HostEntry> merged;
  std::vector<int> count;
  for (HostEntry& e : entries) {
    size_t i = 0;
    while (i < merged.size() && !(merged[i].host == e.host && merged[i].user == e.user)) ++i;
    if (i == merged.size()) {
      merged.push_back(std::move(e));
      count.push_back(1);
      continue;
    }
    if (count[i]++ == 1 && !merged[i].slots) merged[i].slots = 1;
    merged[i].slots = *merged[i].slots + e.slots.value_or(1);
    if (*merged[i].slots > kMaxSlots) Bad(e.where, e.host, "has more than 4096 slots in all");
  }
  return merged;
}

}  // namespace

std::vector<HostEntry> ParseHostList(const std::string& where, std::string_view value) {
  std::vector<HostEntry> entries;
  for (const std::string& item : Split(value, ',')) {
    std::string_view t = Trim(item);
    if (t.empty()) Bad(where, value, "has an empty item; write HOST[:SLOTS][,HOST[:SLOTS]...]");
    entries.push_back(ParseTarget(where, t, true));
  }
  return Merge(std::move(entries));
}

std::vector<HostEntry> ParseHostfile(const std::string& name, std::string_view text) {
  std::vector<HostEntry> entries;
  int line_no = 0;
  std::istringstream lines{std::string(text)};
  for (std::string line; std::getline(lines, line);) {
    ++line_no;
    const std::string where = name + ":" + std::to_string(line_no);
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> words;
    std::istringstream in(line);
    for (std::string w; in >> w;) words.push_back(w);
    if (words.empty()) continue;
    HostEntry e = ParseTarget(where, words[0], true);
    for (size_t k = 1; k < words.size(); ++k) {
      const std::string& w = words[k];
      const size_t eq = w.find('=');
      if (eq == std::string::npos || eq == 0) {
        Bad(where, w, "is not KEY=VALUE; write `host slots=N` (or host:N) on each line");
      }
      const std::string key = w.substr(0, eq);
      if (key == "slots" || key == "cpu" || key == "cpus") {  // cpu=N: Open MPI's older spelling
        if (e.slots) Bad(where, w, "gives the slots a second time");
        e.slots = Slots(where, w, std::string_view(w).substr(eq + 1));
      }
      // max_slots, max-slots and the like are Open MPI's limits for oversubscription: nothing to do here.
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw UsageError(name + " lists no host; write one `host slots=N` per line");
  return Merge(std::move(entries));
}

std::vector<HostEntry> ReadHostfile(const std::string& where, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError(where + "='" + path + "': cannot read the hostfile; check the path");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseHostfile(path, text.str());
}

}  // namespace distrun
