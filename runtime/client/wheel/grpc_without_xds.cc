// Only in the wheel's client library (cmake/client_library.cmake), which links gRPC statically. gRPC's core
// registers its xDS plugins (xDS resolvers, load-balancing policies, RBAC, Google default credentials)
// through this one function; they bring in re2, whose Debian archive is not position-independent and
// cannot go into a shared library. A distrun client dials the one address it is given and uses none of
// them. Defined here, the function keeps the linker from taking gRPC's definition, and every xDS object
// with it, out of the archive. (gRPC 1.51, Debian 12; a release without the function ignores this one.)

namespace grpc_core {

class CoreConfiguration {
 public:
  class Builder;
};

void RegisterExtraFilters(CoreConfiguration::Builder* /*builder*/);
void RegisterExtraFilters(CoreConfiguration::Builder* /*builder*/) {}

}  // namespace grpc_core
