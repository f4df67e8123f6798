#pragma once
// The GCE metadata server as TPU VMs use it: where it is, how to read an instance attribute, and the
// formats of the attributes that describe a TPU slice. Every request goes through env.http_get.

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "detect/environment.h"

namespace distrun {

// Metadata requests are local to the VM; a server that does not answer in this time is not there.
inline constexpr std::chrono::milliseconds kMetadataTimeout{2000};

// Where the metadata server is: GCE_METADATA_IP (as JAX reads it), else GCE_METADATA_HOST (as Google's
// client libraries read it), else metadata.google.internal; either may carry ":port". Throws
// UsageError when the variable is malformed.
struct MetadataServer {
  std::string host;
  int port = 80;
  std::string display;  // "metadata.google.internal" or "GCE_METADATA_IP=127.0.0.1:8080", for messages
};
MetadataServer FindMetadataServer(const Environment& env);

struct MetadataAttribute {
  enum class Outcome { kFound, kNotFound, kUnreachable, kRefused };
  Outcome outcome = Outcome::kUnreachable;
  int status = 0;     // HTTP status when the server answered
  std::string value;  // body with surrounding whitespace removed, when found
};

// GETs /computeMetadata/v1/instance/attributes/<key> with the Metadata-Flavor: Google header.
// kUnreachable when env.http_get is empty or the server does not answer in time; kNotFound on 404;
// kRefused on any other non-200 status.
MetadataAttribute GetInstanceAttribute(const Environment& env, const MetadataServer& server,
                                       std::string_view key);

// The `tpu-env` attribute: lines "KEY: 'value'" (quotes optional). Lines without a colon are ignored.
std::map<std::string, std::string, std::less<>> ParseTpuEnv(std::string_view text);

// The `worker-network-endpoints` attribute: a comma-separated list whose entries are hostnames or IP
// addresses, or, on older TPU VMs, "name:uid:ip" triples (the ip is taken). Throws UsageError naming
// `what` on an empty entry or an address with a blank or a NUL in it.
std::vector<std::string> ParseWorkerEndpoints(std::string_view what, std::string_view text);

}  // namespace distrun
