#include "launcher/process/shell_quote.h"

#include <cctype>
#include <string_view>

namespace distrun {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string ShellWord(const std::string& s) {
  bool plain = !s.empty();
  for (char c : s) {
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) ||
                      std::string_view("/._-=:,+@%").find(c) != std::string_view::npos);
  }
  return plain ? s : ShellQuote(s);
}

std::string ShellJoin(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + ShellWord(w);
  return out;
}

}  // namespace distrun
