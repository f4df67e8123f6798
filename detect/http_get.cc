// Placeholder until the HTTP client lands.
#include "detect/http_get.h"

namespace distrun {
std::optional<HttpResponse> HttpGetBlocking(const HttpRequest&) { return std::nullopt; }
}  // namespace distrun
