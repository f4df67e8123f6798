#pragma once
// gRPC honours http_proxy and friends: a proxy set for web access silently routes (and usually hangs)
// the coordinator's traffic. Detection warns when one would apply to the coordinator host.

#include <string>
#include <vector>

#include "detect/environment.h"

namespace distrun {

std::vector<std::string> ProxyWarnings(const Environment& env, const std::string& coordinator_host);

// True when a no_proxy list ("a.b,.c.d,10.0.0.1,*") exempts `host`.
bool NoProxyCovers(std::string_view no_proxy, std::string_view host);

// "http://user:secret@proxy:3128" → "http://***@proxy:3128", so credentials never reach logs.
std::string RedactProxyCredentials(std::string_view url);

}  // namespace distrun
