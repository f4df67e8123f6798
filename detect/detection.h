#pragma once
// Chooses the detector (automatic order, a named method, or none) and applies explicit values field by
// field. Returns the topology the plan is built from.

#include <optional>
#include <string>
#include <vector>

#include "detect/environment.h"
#include "detect/topology.h"

namespace distrun {

// Values the user gave explicitly (flags, DISTRUN_* variables, config); each wins over detection.
struct ExplicitTopology {
  std::string method = "auto";  // "auto", "deactivate", or a detector name ("local" included)
  std::optional<std::string> coordinator_address;  // host or host:port
  std::optional<int> coordinator_port;
  std::optional<int> num_processes;
  std::optional<int> process_id;
  std::optional<int> num_nodes;
  std::optional<int> node_rank;
  bool node_rank_auto = false;  // --node-rank auto: Topology::node_rank_auto
  std::optional<std::vector<std::string>> local_device_ids;
};

Topology DetectTopology(const Environment& env, const ExplicitTopology& explicit_values);

// Names accepted by --cluster-detection-method.
std::vector<std::string> DetectionMethodNames();

}  // namespace distrun
