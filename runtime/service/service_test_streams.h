#pragma once
// What the service's unit tests keep of a node: the answer to its join, and the events its stream got.

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "runtime/service/types.h"

namespace distrun::testing {

struct Joined {
  std::optional<Status> status;
  NodeAssignment assignment;
};

struct Stream {
  uint64_t id = 0;
  std::shared_ptr<std::vector<JobEvent>> events = std::make_shared<std::vector<JobEvent>>();
  // The latest event of `kind`, or null.
  const JobEvent* Last(JobEvent::Kind kind) const {
    for (auto it = events->rbegin(); it != events->rend(); ++it) {
      if (it->kind == kind) return &*it;
    }
    return nullptr;
  }
};

}  // namespace distrun::testing
