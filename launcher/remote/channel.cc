#include "launcher/remote/channel.h"

#include <charconv>
#include <sstream>

namespace distrun {
namespace {

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t end = line.find(' ', i);
    if (end == std::string_view::npos) end = line.size();
    if (end > i) words.push_back(line.substr(i, end - i));
    i = end;
  }
  return words;
}

}  // namespace

std::string EscapeField(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '%' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || u == 0) {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  if (out.empty()) out = "%";  // an empty field is still a word: "%" alone
  return out;
}

std::optional<std::string> UnescapeField(std::string_view field) {
  if (field == "%") return std::string();
  std::string out;
  out.reserve(field.size());
  for (size_t i = 0; i < field.size(); ++i) {
    if (field[i] != '%') {
      out += field[i];
      continue;
    }
    if (i + 2 >= field.size()) return std::nullopt;
    const int hi = HexDigit(field[i + 1]), lo = HexDigit(field[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  return out;
}

std::string FormatHello(const Hello& hello) {
  return "distrun-remote " + std::to_string(hello.protocol) + " " + EscapeField(hello.version) + " " +
         EscapeField(hello.host) + " " + std::to_string(hello.free_port) + " " +
         EscapeField(hello.cwd_problem) + "\n";
}

std::optional<Hello> ParseHello(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  std::vector<std::string_view> w = Words(line);
  if (w.size() != 6 || w[0] != "distrun-remote") return std::nullopt;
  Hello h;
  auto number = [](std::string_view s, int& out) {
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && end == s.data() + s.size();
  };
  std::optional<std::string> version = UnescapeField(w[2]), host = UnescapeField(w[3]),
                             cwd = UnescapeField(w[5]);
  if (!number(w[1], h.protocol) || !number(w[4], h.free_port) || !version || !host || !cwd)
    return std::nullopt;
  h.version = *version;
  h.host = *host;
  h.cwd_problem = *cwd;
  return h;
}

std::string FormatChannelLine(std::string_view verb) { return std::string(verb) + "\n"; }

std::string FormatChannelLine(std::string_view verb, std::string_view value) {
  return std::string(verb) + " " + EscapeField(value) + "\n";
}

std::optional<ChannelLine> ParseChannelLine(std::string_view line) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  std::vector<std::string_view> w = Words(line);
  if (w.empty() || w.size() > 2) return std::nullopt;
  ChannelLine out{std::string(w[0]), {}};
  if (w.size() == 2) {
    std::optional<std::string> v = UnescapeField(w[1]);
    if (!v) return std::nullopt;
    out.value = std::move(*v);
  }
  return out;
}

std::string FormatStart(const StartMessage& start) {
  std::string out;
  for (const std::string& a : start.argv) out += FormatChannelLine("arg", a);
  for (const std::string& e : start.env) out += FormatChannelLine("env", e);
  return out + FormatChannelLine("go");
}

}  // namespace distrun
