#pragma once
// A small blocking HTTP/1.1 GET client for metadata servers (GCE), with a hard timeout.

#include <optional>
#include <string_view>

#include "detect/environment.h"

namespace distrun {

std::optional<HttpResponse> HttpGetBlocking(const HttpRequest& request);

// What the bytes a server sent so far make of its answer to a GET (no sockets: the parser HttpGetBlocking
// feeds after each read). `closed`: the server closed the connection after them, so an answer is complete
// (kComplete, in `response`) or refused (kBad: malformed, truncated, oversized, an interim status);
// kIncomplete only while more may come.
enum class HttpAnswer { kIncomplete, kComplete, kBad };
HttpAnswer ParseHttpAnswer(std::string_view received, bool closed, HttpResponse* response);

}  // namespace distrun
