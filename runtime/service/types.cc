#include "runtime/service/types.h"

namespace distrun {

const char* StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kAlreadyExists:
      return "ALREADY_EXISTS";
    case StatusCode::kFailedPrecondition:
      return "FAILED_PRECONDITION";
    case StatusCode::kOutOfRange:
      return "OUT_OF_RANGE";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kAborted:
      return "ABORTED";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
    case StatusCode::kUnauthenticated:
      return "UNAUTHENTICATED";
    case StatusCode::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

std::string DescribeFailure(const FailedWorker& f) {
  std::string who = f.process_id >= 0 ? "rank " + std::to_string(f.process_id) + " on " : std::string();
  who += "node " + std::to_string(f.node_rank);
  if (!f.host.empty()) who += " (" + f.host + ")";
  return who + ": " + (f.description.empty() ? "exit code " + std::to_string(f.exit_code) : f.description);
}

NodeProgress AgedBy(NodeProgress progress, int64_t ms) {
  for (RankProgress& r : progress.ranks) {
    r.advanced_ms_ago += ms;
    r.reported_ms_ago += ms;
  }
  if (progress.quiet_ms > 0) progress.quiet_ms += ms;
  return progress;
}

const char* JobStateName(JobState state) {
  static constexpr const char* kNames[] = {"rendezvous", "running", "succeeded", "stopped"};
  return kNames[static_cast<size_t>(state)];
}

}  // namespace distrun
