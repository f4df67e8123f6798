// Flux: a task of a Flux job (flux run, flux submit). The job shell exports FLUX_TASK_RANK,
// FLUX_TASK_LOCAL_ID, FLUX_JOB_SIZE, FLUX_JOB_NNODES and FLUX_JOB_ID, but neither the job's hosts nor the
// tasks per node; a job on several nodes therefore needs the MPI probe to find rank 0's host.
#include <algorithm>
#include <cstdint>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr std::string_view kJobIdFix =
    "Flux sets it in F58 form such as ƒ2wGgTHX (or f2wGgTHX); unset it if it was copied from another job";

// FLUX_JOB_ID as its 64-bit number. F58 ("ƒ" or, in an ASCII locale, "f", then base-58 digits) is what
// the shell sets; decimal is accepted too. Hashing the number keeps the port the same on nodes whose
// locales print the prefix differently.
uint64_t ParseFluxJobId(std::string_view value) {
  constexpr std::string_view kAlphabet = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
  auto bad = [&](std::string_view why) { ThrowBadVariable("FLUX_JOB_ID", value, why, kJobIdFix); };
  std::string_view digits = value;
  uint64_t base = 10;
  if (digits.starts_with("\xC6\x92")) {  // UTF-8 "ƒ"
    digits.remove_prefix(2);
    base = 58;
  } else if (digits.starts_with('f')) {
    digits.remove_prefix(1);
    base = 58;
  }
  if (digits.empty()) bad("is not a Flux job id");
  uint64_t id = 0;
  for (char c : digits) {
    size_t d = base == 58 ? kAlphabet.find(c) : std::string_view("0123456789").find(c);
    if (d == std::string_view::npos)
      bad(base == 58 ? "has a character outside F58's alphabet" : "is not a Flux job id");
    if (id > (UINT64_MAX - d) / base) bad("is larger than a 64-bit Flux job id");
    id = id * base + d;
  }
  return id;
}

std::vector<std::string> Missing(const Environment& env) {
  return AbsentVariables(
      env, {"FLUX_TASK_RANK", "FLUX_TASK_LOCAL_ID", "FLUX_JOB_SIZE", "FLUX_JOB_NNODES", "FLUX_JOB_ID"});
}

Topology Detect(const Environment& env) {
  Topology t;
  t.method = "flux";
  const int size = RequireInt(env, "FLUX_JOB_SIZE");
  RequirePositive("FLUX_JOB_SIZE", size);
  const int rank = RequireInt(env, "FLUX_TASK_RANK");
  RequireBelow("FLUX_TASK_RANK", rank, "FLUX_JOB_SIZE", size);
  const int nodes = RequireInt(env, "FLUX_JOB_NNODES");
  RequirePositive("FLUX_JOB_NNODES", nodes);
  if (nodes > size) {
    ThrowBadVariable(
        "FLUX_JOB_NNODES", *env.Get("FLUX_JOB_NNODES"),
        "exceeds FLUX_JOB_SIZE=" + std::to_string(size) + ", but every node of a job runs a task",
        "the FLUX_* variables disagree; unset copies of them left from another job");
  }
  const int local = RequireInt(env, "FLUX_TASK_LOCAL_ID");
  // The other nodes run at least one task each, which bounds this node's.
  if (local > size - nodes) {
    ThrowBadVariable("FLUX_TASK_LOCAL_ID", *env.Get("FLUX_TASK_LOCAL_ID"),
                     "is too large for FLUX_JOB_SIZE=" + std::to_string(size) +
                         " tasks on FLUX_JOB_NNODES=" + std::to_string(nodes) + " nodes",
                     "the FLUX_* variables disagree; unset copies of them left from another job");
  }

  const std::string& job = *env.Get("FLUX_JOB_ID");
  t.job_id = job;
  t.coordinator_port = HashedCoordinatorPort(std::to_string(ParseFluxJobId(job)));

  t.num_tasks = size;
  t.task_id = rank;
  t.local_task = local;
  t.num_nodes = nodes;
  t.launch_mode = size == nodes ? LaunchMode::kPerNode : LaunchMode::kPerTask;
  if (nodes == 1) {
    t.local_tasks = size;
    t.node_rank = 0;
    t.coordinator_host = "127.0.0.1";
    if (!env.hostname.empty()) t.hosts = {env.hostname};
    return t;
  }

  // Flux exports no per-node counts: an even layout is the only one they follow from. Flux's default task
  // map is block, so ranks fill node 0 first.
  const int per_node = size / nodes;
  if (size % nodes == 0) {
    t.local_tasks = per_node;
    t.node_rank = rank / per_node;
    if (per_node > 1) {
      t.warnings.push_back("tasks per node (" + std::to_string(per_node) +
                           ") and node rank are inferred from FLUX_JOB_SIZE=" + std::to_string(size) +
                           " / FLUX_JOB_NNODES=" + std::to_string(nodes) +
                           " assuming Flux's default block task map");
    }
  } else {
    t.local_tasks = std::max(local + 1, per_node + 1);
    t.node_rank = 0;
    t.warnings.push_back("tasks per node unknown: FLUX_JOB_SIZE=" + std::to_string(size) +
                         " is not a multiple of FLUX_JOB_NNODES=" + std::to_string(nodes) + "; assuming " +
                         std::to_string(t.local_tasks) + " on this node");
  }
  // Flux's Cray PALS plugin exports the node index (the job shell's rank).
  if (std::optional<int> node = OptionalInt(env, "PALS_NODEID")) {
    RequireBelow("PALS_NODEID", *node, "FLUX_JOB_NNODES", nodes);
    t.node_rank = *node;
  }
  // Which host runs task 0 is not in the environment: the MPI probe has to find it.
  t.coordinator_host.clear();
  return t;
}

}  // namespace

Detector FluxDetector() { return {"flux", Missing, Detect}; }

}  // namespace distrun
