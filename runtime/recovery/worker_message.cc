#include "runtime/recovery/worker_message.h"

#include <algorithm>
#include <charconv>
#include <limits>

namespace distrun {
namespace {

constexpr char kEnvPrefix[] = "env.";

bool IsKeyChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
}

bool IsKey(std::string_view key) { return !key.empty() && std::all_of(key.begin(), key.end(), IsKeyChar); }

std::optional<int64_t> ToInt(std::string_view text) {
  int64_t value = 0;
  const char* end = text.data() + text.size();
  auto [at, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || at != end || text.empty()) return std::nullopt;
  return value;
}

std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, 40)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > 40) out += "...";
  return out;
}

}  // namespace

std::string GenerationStorePrefix(int generation) { return kGenerationPrefix + std::to_string(generation); }

std::optional<int64_t> GenerationOfKey(std::string_view key) {
  constexpr std::string_view prefix = kGenerationPrefix;
  if (!key.starts_with(prefix)) return std::nullopt;
  key.remove_prefix(prefix.size());
  const size_t slash = key.find('/');
  if (slash == std::string_view::npos || slash > 18) return std::nullopt;
  return ToInt(key.substr(0, slash));
}

WorkerMessage& WorkerMessage::Add(std::string key, std::string value) {
  fields.emplace_back(std::move(key), std::move(value));
  return *this;
}

WorkerMessage& WorkerMessage::Add(std::string key, int64_t value) {
  return Add(std::move(key), std::to_string(value));
}

const std::string* WorkerMessage::Find(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

int64_t WorkerMessage::Int(std::string_view key, int64_t min, int64_t max) const {
  const std::string* text = Find(key);
  if (text == nullptr) {
    throw WorkerMessageError("the worker channel's '" + name + "' message has no " + std::string(key));
  }
  std::optional<int64_t> value = ToInt(*text);
  if (!value || *value < min || *value > max) {
    throw WorkerMessageError("the worker channel's '" + name + "' message has " + std::string(key) + "='" +
                             Printable(*text) + "', not an integer from " + std::to_string(min) + " to " +
                             std::to_string(max));
  }
  return *value;
}

std::string EncodeFrame(const WorkerMessage& message) {
  if (!IsKey(message.name)) throw WorkerMessageError("a worker message needs a name of [A-Za-z0-9_.]");
  std::string payload = message.name;
  for (const auto& [key, value] : message.fields) {
    if (!IsKey(key)) throw WorkerMessageError("'" + Printable(key) + "' is not a worker message's key");
    if (value.find('\n') != std::string::npos) {
      throw WorkerMessageError("the value of " + key +
                               " holds a newline, which a worker message cannot carry");
    }
    payload.append(1, '\n').append(key).append(1, '=').append(value);
  }
  if (payload.size() > kMaxWorkerFrameBytes) {
    throw WorkerMessageError("a '" + message.name + "' message of " + std::to_string(payload.size()) +
                             " bytes is over the worker channel's limit of " +
                             std::to_string(kMaxWorkerFrameBytes));
  }
  const auto n = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  for (int shift : {24, 16, 8, 0}) frame.push_back(static_cast<char>((n >> shift) & 0xff));
  frame += payload;
  return frame;
}

WorkerMessage DecodePayload(std::string_view payload) {
  WorkerMessage m;
  size_t line_end = payload.find('\n');
  m.name = std::string(payload.substr(0, line_end));
  if (!IsKey(m.name))
    throw WorkerMessageError("a worker message begins with '" + Printable(m.name) + "', not a name");
  while (line_end != std::string_view::npos) {
    const size_t begin = line_end + 1;
    line_end = payload.find('\n', begin);
    std::string_view line =
        payload.substr(begin, line_end == std::string_view::npos ? line_end : line_end - begin);
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos || !IsKey(line.substr(0, eq))) {
      throw WorkerMessageError("the worker channel's '" + m.name + "' message has a line '" +
                               Printable(line) + "', not key=value");
    }
    m.fields.emplace_back(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return m;
}

void FrameReader::Append(std::string_view bytes) {
  if (start_ > 0 && start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::string> FrameReader::Next() {
  if (buffered() < 4) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + start_);
  const uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (n > kMaxWorkerFrameBytes) {
    throw WorkerMessageError("a worker channel frame says it is " + std::to_string(n) +
                             " bytes long, over the limit of " + std::to_string(kMaxWorkerFrameBytes));
  }
  if (buffered() < 4 + size_t{n}) return std::nullopt;
  std::string payload = buffer_.substr(start_ + 4, n);
  start_ += 4 + n;
  // Keep the buffer from growing with what was read: compact once the read part dominates.
  if (start_ > 4096 && start_ * 2 > buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
  return payload;
}

std::string FormatRanks(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::vector<int> ParseRanks(std::string_view text, size_t max_ranks) {
  std::vector<int> ranks;
  if (text.empty()) return ranks;
  auto bad = [&](const std::string& why) {
    return WorkerMessageError("'" + Printable(text) + "' is not a list of ranks: " + why);
  };
  size_t begin = 0;
  while (true) {
    const size_t end = std::min(text.find(',', begin), text.size());
    std::string_view part = text.substr(begin, end - begin);
    const size_t dash = part.find('-', 1);
    std::optional<int64_t> lo = ToInt(part.substr(0, dash));
    std::optional<int64_t> hi = dash == std::string_view::npos ? lo : ToInt(part.substr(dash + 1));
    if (!lo || !hi || *lo < 0 || *hi < *lo || *hi > std::numeric_limits<int>::max()) {
      throw bad("'" + Printable(part) + "' is not N or N-M with 0 <= N <= M");
    }
    if (static_cast<uint64_t>(*hi - *lo) >= max_ranks - std::min(max_ranks, ranks.size())) {
      throw bad("more than " + std::to_string(max_ranks) + " ranks");
    }
    for (int64_t r = *lo; r <= *hi; ++r) ranks.push_back(static_cast<int>(r));
    if (end == text.size()) break;
    begin = end + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

WorkerMessage ToMessage(const HelloMessage& hello) {
  WorkerMessage m{"hello", {}};
  m.Add("version", hello.version).Add("pid", hello.pid).Add("generation", hello.generation);
  return m;
}

HelloMessage HelloFrom(const WorkerMessage& m) {
  HelloMessage h;
  h.version = static_cast<int>(m.Int("version", 1, std::numeric_limits<int>::max()));
  h.pid = m.Int("pid", 1, std::numeric_limits<int>::max());
  h.generation = static_cast<int>(m.Int("generation", -1, std::numeric_limits<int>::max()));
  return h;
}

WorkerMessage ToMessage(const WorldMessage& w) {
  WorkerMessage m{"world", {}};
  m.Add("generation", w.generation)
      .Add("rank", w.rank)
      .Add("world_size", w.world_size)
      .Add("local_rank", w.local_rank)
      .Add("local_world_size", w.local_world_size)
      .Add("group_rank", w.group_rank)
      .Add("group_world_size", w.group_world_size)
      .Add("new", w.is_new ? 1 : 0)
      .Add("source", w.source)
      .Add("lost", FormatRanks(w.lost))
      .Add("joined", FormatRanks(w.joined))
      .Add("store_prefix", w.store_prefix);
  for (const auto& [name, value] : w.env) m.Add(kEnvPrefix + name, value);
  return m;
}

WorldMessage WorldFrom(const WorkerMessage& m) {
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  WorldMessage w;
  w.generation = static_cast<int>(m.Int("generation", 0, kMax));
  w.world_size = static_cast<int>(m.Int("world_size", 1, kMax));
  w.rank = static_cast<int>(m.Int("rank", 0, w.world_size - 1));
  w.local_world_size = static_cast<int>(m.Int("local_world_size", 1, kMax));
  w.local_rank = static_cast<int>(m.Int("local_rank", 0, w.local_world_size - 1));
  w.group_world_size = static_cast<int>(m.Int("group_world_size", 1, kMax));
  w.group_rank = static_cast<int>(m.Int("group_rank", 0, w.group_world_size - 1));
  w.is_new = m.Int("new", 0, 1) == 1;
  w.source = static_cast<int>(m.Int("source", -1, w.world_size - 1));
  const auto ranks = [&](const char* key) {
    const std::string* text = m.Find(key);
    return text ? ParseRanks(*text) : std::vector<int>{};
  };
  w.lost = ranks("lost");
  w.joined = ranks("joined");
  if (const std::string* prefix = m.Find("store_prefix")) w.store_prefix = *prefix;
  for (const auto& [key, value] : m.fields) {
    if (key.starts_with(kEnvPrefix) && key.size() > sizeof(kEnvPrefix) - 1) {
      w.env.emplace_back(key.substr(sizeof(kEnvPrefix) - 1), value);
    }
  }
  return w;
}

WorkerMessage GenerationMessage(std::string name, int generation) {
  WorkerMessage m{std::move(name), {}};
  m.Add("generation", generation);
  return m;
}

int GenerationOf(const WorkerMessage& m) {
  return static_cast<int>(m.Int("generation", 0, std::numeric_limits<int>::max()));
}

WorkerMessage ErrorMessage(const std::string& text) {
  WorkerMessage m{"error", {}};
  std::string line = text;
  std::replace(line.begin(), line.end(), '\n', ' ');
  m.Add("message", line);
  return m;
}

}  // namespace distrun
