#include "detect/mpi_env.h"

#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

std::string Pair(std::string_view name, int value) { return std::string(name) + "=" + std::to_string(value); }

constexpr std::string_view kStale =
    "the launcher's variables disagree; unset copies of them left from another job";

}  // namespace

MpiRanks ReadMpiRanks(const Environment& env, std::string_view size_var, std::string_view rank_var,
                      std::string_view local_rank_var, std::string_view local_size_var) {
  MpiRanks r;
  r.size_var = size_var;
  r.rank_var = rank_var;
  r.local_rank_var = local_rank_var;
  r.local_size_var = local_size_var;
  r.size = RequireInt(env, size_var);
  RequirePositive(size_var, r.size);
  r.rank = RequireInt(env, rank_var);
  RequireBelow(rank_var, r.rank, size_var, r.size);
  r.local_size = RequireInt(env, local_size_var);
  RequirePositive(local_size_var, r.local_size);
  r.local_rank = RequireInt(env, local_rank_var);
  RequireBelow(local_rank_var, r.local_rank, local_size_var, r.local_size);
  if (r.local_size > r.size) {
    throw UsageError(Pair(local_size_var, r.local_size) + " exceeds " + Pair(size_var, r.size) +
                     ": a node cannot hold more ranks than the job; " + std::string(kStale));
  }
  return r;
}

void RequireSameIfSet(const Environment& env, std::string_view name, int value, std::string_view source) {
  std::optional<int> other = OptionalInt(env, name);
  if (other && *other != value) {
    ThrowBadVariable(name, *env.Get(name), "differs from " + Pair(source, value), kStale);
  }
}

void FillMpiTasks(const MpiRanks& r, Topology& t) {
  t.num_tasks = r.size;
  t.task_id = r.rank;
  t.local_task = r.local_rank;
  t.local_tasks = r.local_size;
  t.launch_mode = r.local_size == 1 ? LaunchMode::kPerNode : LaunchMode::kPerTask;
}

void FillFromMpiRanks(const MpiRanks& r, std::optional<int> num_nodes, std::string_view num_nodes_var,
                      const Environment& env, Topology& t) {
  FillMpiTasks(r, t);

  // This node holds local_size ranks and every other node at least one.
  const int max_nodes = r.size - r.local_size + 1;
  if (num_nodes) {
    RequirePositive(num_nodes_var, *num_nodes);
    if (*num_nodes > max_nodes) {
      throw UsageError(Pair(num_nodes_var, *num_nodes) + " is more nodes than " + Pair(r.size_var, r.size) +
                       " ranks can fill with " + Pair(r.local_size_var, r.local_size) + " on this node; " +
                       std::string(kStale));
    }
  }

  if (r.local_size == r.size) {
    // Every rank is on this node: loopback reaches the coordinator.
    t.num_nodes = 1;
    t.node_rank = 0;
    t.coordinator_host = "127.0.0.1";
    t.hosts.clear();
    if (!env.hostname.empty()) t.hosts.push_back(env.hostname);
    return;
  }

  // The ranks span hosts: which one holds rank 0 is not in the environment (mpirun may even run on a host
  // with no ranks, and its first address may not be routable), so the MPI probe has to find it.
  t.coordinator_host.clear();
  t.hosts.clear();
  if (num_nodes) {
    if (*num_nodes == 1) {
      throw UsageError(Pair(num_nodes_var, 1) + " but only " + Pair(r.local_size_var, r.local_size) + " of " +
                       Pair(r.size_var, r.size) + " ranks run on this node; " + std::string(kStale));
    }
    t.num_nodes = *num_nodes;
  } else if (r.size % r.local_size == 0) {
    t.num_nodes = r.size / r.local_size;
    t.warnings.push_back("node count " + std::to_string(t.num_nodes) + " is inferred from " +
                         Pair(r.size_var, r.size) + " / " + Pair(r.local_size_var, r.local_size) +
                         ", assuming every node runs as many ranks as this one (the launcher does not say)");
  } else {
    t.num_nodes = 0;
    t.warnings.push_back("node count unknown: " + Pair(r.size_var, r.size) +
                         " is not a multiple of this node's " + Pair(r.local_size_var, r.local_size) +
                         " and the launcher does not export it");
  }
  // With one rank per node, ranks number the nodes; otherwise the probe assigns node ranks.
  t.node_rank = t.num_nodes == r.size ? r.rank : 0;
}

}  // namespace distrun
