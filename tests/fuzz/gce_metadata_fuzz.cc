// libFuzzer target for the GCE metadata server's answers as a TPU VM's distrun reads them: the HTTP
// response (detect/http_get.h ParseHttpAnswer) read in pieces as they arrive and whole once the server
// closed the connection, and the attributes' formats (detect/gce_metadata.h ParseTpuEnv,
// ParseWorkerEndpoints), on the body of a response and on the input itself. A refused answer (kBad) and
// UsageError are the only failures; any other exception, a crash, a leak, a sanitizer report, an answer
// that reads differently in pieces than whole, or a parsed value that breaks what the TPU detector relies on
// is a finding.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "detect/errors.h"
#include "detect/gce_metadata.h"
#include "detect/http_get.h"
#include "detect/parse.h"

namespace {

using namespace distrun;

// What Trim takes off (detect/parse.h).
bool Blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

void Attributes(std::string_view text) {
  for (const auto& [key, value] : ParseTpuEnv(text)) {
    if (key.empty() || key.find_first_of(":\n") != std::string::npos || Blank(key.front()) ||
        Blank(key.back()) || value.find('\n') != std::string::npos) {
      __builtin_trap();
    }
  }
  try {
    for (const std::string& host : ParseWorkerEndpoints("worker-network-endpoints", text)) {
      if (host.empty() || host.find_first_of(std::string_view(", \t\r\n\0", 6)) != std::string::npos) {
        __builtin_trap();
      }
    }
  } catch (const UsageError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  HttpResponse whole;
  const HttpAnswer closed = ParseHttpAnswer(input, /*closed=*/true, &whole);
  if (closed == HttpAnswer::kIncomplete) __builtin_trap();  // a closed connection decides
  if (closed == HttpAnswer::kComplete && (whole.status < 200 || whole.status > 599)) __builtin_trap();

  // As the bytes arrive: an answer complete before the server closed the connection is the same answer.
  const size_t step = size % 31 + 1;
  for (size_t n = std::min(step, size); n > 0; n = std::min(n + step, size)) {
    HttpResponse early;
    const HttpAnswer answer = ParseHttpAnswer(input.substr(0, n), /*closed=*/false, &early);
    if (answer == HttpAnswer::kComplete &&
        (closed != HttpAnswer::kComplete || early.status != whole.status || early.body != whole.body)) {
      __builtin_trap();
    }
    if (answer == HttpAnswer::kBad && closed != HttpAnswer::kBad) __builtin_trap();
    if (answer != HttpAnswer::kIncomplete || n == size) break;
  }

  if (closed == HttpAnswer::kComplete) Attributes(Trim(whole.body));  // GetInstanceAttribute trims
  Attributes(input);
  return 0;
}
