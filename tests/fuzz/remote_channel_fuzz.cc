// libFuzzer target for the ssh launch channel's lines (launcher/remote/channel.h): the host's hello as the
// launcher reads it and the launcher's lines as a host reads them, each line of the input tried as both,
// with and without its line end, and unescaped as a field. nullopt is the only refusal. What reads back must
// format and read back the same (a hello, a verb and its value), and any value must escape into one word that
// unescapes to itself; any exception, a crash, a leak or a sanitizer report is a finding too.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "launcher/remote/channel.h"

namespace {

using namespace distrun;

void EscapesBack(std::string_view value) {
  const std::string field = EscapeField(value);
  if (field.empty() || field.find_first_of(" \t\r\n") != std::string::npos) __builtin_trap();
  const std::optional<std::string> back = UnescapeField(field);
  if (!back || *back != value) __builtin_trap();
}

void Line(std::string_view line) {
  (void)UnescapeField(line);
  EscapesBack(line);
  if (std::optional<Hello> hello = ParseHello(line)) {
    const std::optional<Hello> again = ParseHello(FormatHello(*hello));
    if (!again || again->protocol != hello->protocol || again->version != hello->version ||
        again->host != hello->host || again->free_port != hello->free_port ||
        again->cwd_problem != hello->cwd_problem) {
      __builtin_trap();
    }
  }
  if (std::optional<ChannelLine> parsed = ParseChannelLine(line)) {
    if (parsed->verb.empty()) __builtin_trap();
    // With a value, verb and value come back whatever they hold; a verb alone, where it is a word the
    // launcher could send (no line end in it: a lone "\r" reads as a verb, but the launcher's are words).
    const std::optional<ChannelLine> again = ParseChannelLine(FormatChannelLine(parsed->verb, parsed->value));
    if (!again || again->verb != parsed->verb || again->value != parsed->value) __builtin_trap();
    if (parsed->value.empty() && parsed->verb.find_first_of("\r\n") == std::string::npos) {
      const std::optional<ChannelLine> bare = ParseChannelLine(FormatChannelLine(parsed->verb));
      if (!bare || bare->verb != parsed->verb || !bare->value.empty()) __builtin_trap();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  // Lines as both sides cut them: a host's without its '\n' (remote_node.cc), the launcher's with it
  // (host_session.cc).
  for (size_t at = 0; at < input.size();) {
    size_t end = input.find('\n', at);
    end = end == std::string_view::npos ? input.size() : end + 1;
    Line(input.substr(at, end - at));
    if (input[end - 1] == '\n') Line(input.substr(at, end - 1 - at));
    at = end;
  }
  return 0;
}
