#pragma once
// Node 0 in the runtime's unit tests: a coordination service whose timeouts no test reaches unless it sets
// its own, the gRPC server's configuration on loopback with the test's job token, and loggers that write
// into a stream the test reads back.

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <memory>
#include <ostream>
#include <string>

#include "runtime/service/service.h"
#include "runtime/transport/grpc_server.h"

namespace distrun::testing {

// `nodes` nodes; 20 s to initialise and between heartbeats.
inline ServiceConfig TestServiceConfig(int nodes) {
  ServiceConfig sc;
  sc.num_nodes = nodes;
  sc.initialization_timeout = std::chrono::seconds(20);
  sc.heartbeat_timeout = std::chrono::seconds(20);
  return sc;
}

// 127.0.0.1 on a port the OS picks, loopback only, admitting `token`.
inline GrpcServerConfig TestGrpcServerConfig(const std::string& token) {
  GrpcServerConfig gc;
  gc.address = "127.0.0.1:0";
  gc.loopback_only = true;
  gc.token = token;
  return gc;
}

// A logger named `name` writing into `out`, which must outlive it.
inline std::shared_ptr<spdlog::logger> StreamLogger(const std::string& name, std::ostream& out) {
  return std::make_shared<spdlog::logger>(name, std::make_shared<spdlog::sinks::ostream_sink_mt>(out));
}

}  // namespace distrun::testing
