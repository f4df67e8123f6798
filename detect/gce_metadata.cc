#include "detect/gce_metadata.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

bool IsIpv6Literal(std::string_view s) {
  in6_addr addr{};
  // inet_pton reads up to a NUL: "fe80::\0anything" must not pass for an address.
  return s.find('\0') == std::string_view::npos && inet_pton(AF_INET6, std::string(s).c_str(), &addr) == 1;
}

}  // namespace

MetadataServer FindMetadataServer(const Environment& env) {
  MetadataServer server;
  for (std::string_view name : {"GCE_METADATA_IP", "GCE_METADATA_HOST"}) {
    const std::string* value = env.Get(name);
    if (value == nullptr || value->empty()) continue;
    server.display = std::string(name) + "=" + *value;
    if (IsIpv6Literal(*value)) {  // a bare IPv6 address has no port
      server.host = *value;
      return server;
    }
    HostPort hp = ParseHostPort(name, *value);
    server.host = hp.host;
    if (hp.port) server.port = *hp.port;
    return server;
  }
  server.host = "metadata.google.internal";
  server.display = server.host;
  return server;
}

MetadataAttribute GetInstanceAttribute(const Environment& env, const MetadataServer& server,
                                       std::string_view key) {
  MetadataAttribute result;
  if (!env.http_get) return result;
  HttpRequest request;
  request.host = server.host;
  request.port = server.port;
  request.path = "/computeMetadata/v1/instance/attributes/" + std::string(key);
  // Without this header the server refuses (403): it proves the request is not a forwarded one.
  request.headers = {{"Metadata-Flavor", "Google"}};
  request.timeout = kMetadataTimeout;
  std::optional<HttpResponse> response = env.http_get(request);
  if (!response) return result;
  result.status = response->status;
  if (response->status == 200) {
    result.outcome = MetadataAttribute::Outcome::kFound;
    result.value = std::string(Trim(response->body));
  } else if (response->status == 404) {
    result.outcome = MetadataAttribute::Outcome::kNotFound;
  } else {
    result.outcome = MetadataAttribute::Outcome::kRefused;
  }
  return result;
}

std::map<std::string, std::string, std::less<>> ParseTpuEnv(std::string_view text) {
  std::map<std::string, std::string, std::less<>> out;
  for (const std::string& line : Split(text, '\n')) {
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string_view key = Trim(std::string_view(line).substr(0, colon));
    std::string_view value = Trim(std::string_view(line).substr(colon + 1));
    if (value.size() >= 2 && (value.front() == '\'' || value.front() == '"') &&
        value.back() == value.front()) {
      value = value.substr(1, value.size() - 2);
    }
    if (!key.empty()) out.insert_or_assign(std::string(key), std::string(value));
  }
  return out;
}

std::vector<std::string> ParseWorkerEndpoints(std::string_view what, std::string_view text) {
  auto bad = [&](std::string_view why) {
    return UsageError(std::string(what) + "='" + ShownValue(text) + "' " + std::string(why) +
                      "; set TPU_WORKER_HOSTNAMES (comma-separated worker hosts) and TPU_WORKER_ID instead");
  };
  std::vector<std::string> hosts;
  for (const std::string& field : Split(text, ',')) {
    std::string_view entry = Trim(field);
    if (entry.empty()) throw bad("has an empty entry");
    const size_t first = entry.find(':');
    std::string host(entry);
    if (IsIpv6Literal(entry) || first == std::string_view::npos) {
      // an address or a name as it stands
    } else if (entry.front() == '[' || entry.find(':', first + 1) == std::string_view::npos) {
      host = ParseHostPort(what, entry).host;  // host:port or [v6]:port
    } else {
      // "name:uid:ip" from older TPU VMs; the ip may itself be IPv6.
      host = entry.substr(entry.find(':', first + 1) + 1);
      if (host.empty()) throw bad("has an entry without an address after 'name:uid:'");
    }
    // A blank ("name:uid: ip", a line break) is in no address, nor a NUL, where the resolver stops reading.
    if (host.find_first_of(std::string_view(" \t\r\n\0", 5)) != std::string::npos) {
      throw bad("has an address with a blank or a NUL in it");
    }
    hosts.push_back(std::move(host));
  }
  return hosts;
}

}  // namespace distrun
