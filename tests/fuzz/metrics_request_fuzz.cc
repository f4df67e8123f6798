// libFuzzer target for the head of an HTTP request to node 0's metrics server (runtime/metrics/http_server.h
// ParseServerRequest), what anyone who reaches --metrics-address sends, and the token checks the handler
// makes of its headers (observe_server.h TokensMatch). False is the only refusal; any exception, a crash, a
// leak, a sanitizer report, a request that breaks what the handlers rely on (a method without blanks, a path
// that starts with '/' and holds no '?', lower-case header names, values without surrounding blanks) or a
// token check that admits anything but the token is a finding.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/metrics/http_server.h"
#include "runtime/metrics/observe_server.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string head(reinterpret_cast<const char*>(data), size);
  distrun::ServerRequest request;
  if (!distrun::ParseServerRequest(head, &request)) return 0;
  if (request.method.find(' ') != std::string::npos) __builtin_trap();
  if (request.path.empty() || request.path[0] != '/' || request.path.find('?') != std::string::npos) {
    __builtin_trap();
  }
  for (const auto& [name, value] : request.headers) {
    if (name.empty()) __builtin_trap();
    for (char c : name) {
      if (std::isupper(static_cast<unsigned char>(c))) __builtin_trap();
    }
    if (!value.empty() &&
        (value.front() == ' ' || value.front() == '\t' || value.back() == ' ' || value.back() == '\t')) {
      __builtin_trap();
    }
    // As the handler checks Authorization's bearer token and X-Distrun-Token: only the token itself passes.
    for (const std::string& token : {std::string("s3cret-job-token"), value.substr(0, value.size() / 2)}) {
      if (distrun::TokensMatch(value, token) != (!token.empty() && value == token)) __builtin_trap();
    }
  }
  // The server reads a head up to its blank line: what follows it (a body it does not take) changes nothing.
  const size_t blank = head.find("\r\n\r\n");
  if (blank != std::string::npos) {
    distrun::ServerRequest again;
    if (!distrun::ParseServerRequest(head.substr(0, blank + 4) + "x: y\r\n", &again) ||
        again.method != request.method || again.path != request.path || again.query != request.query ||
        again.headers != request.headers) {
      __builtin_trap();
    }
  }
  return 0;
}
