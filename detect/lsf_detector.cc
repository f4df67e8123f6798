// IBM LSF with jsrun (Job Step Manager): JSM_NAMESPACE_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE} and LSB_JOBID.
//
// Hosts come from LSB_DJOB_HOSTFILE (one line per slot), else LSB_MCPU_HOSTS ("host slots ..."), else
// LSB_HOSTS (one word per slot). On CSM systems such as Summit these start with the launch node, where
// the batch script runs with one slot and jsrun never places tasks ("batch3" then "a01n06" x 42): it is
// dropped when it is listed once and every other host more than once. jsrun fills the compute hosts in
// order, so the first of them holds the first resource set: the coordinator.
#include <algorithm>
#include <fstream>
#include <sstream>
#include <unordered_map>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/mpi_env.h"
#include "detect/parse.h"
#include "detect/slurm_step.h"

namespace distrun {
namespace {

struct HostSlots {
  std::string host;
  long long slots = 0;
};

// Slot counts per host in order of first appearance. Indexed: a full-machine host file has hundreds of
// thousands of lines.
class HostTally {
 public:
  void Add(std::string_view host, long long slots) {
    auto [it, added] = index_.try_emplace(std::string(host), hosts_.size());
    if (added) hosts_.push_back({std::string(host), 0});
    hosts_[it->second].slots += slots;
  }
  std::vector<HostSlots> Take() { return std::move(hosts_); }

 private:
  std::vector<HostSlots> hosts_;
  std::unordered_map<std::string, size_t> index_;
};

std::vector<std::string> Words(std::string_view text) {
  std::istringstream in{std::string(text)};
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// Slots per host from the first source the environment has; empty when it has none. `source` names it.
std::vector<HostSlots> ReadHostSlots(const Environment& env, std::string& source,
                                     std::vector<std::string>& warnings) {
  HostTally tally;
  if (const std::string* file = env.Get("LSB_DJOB_HOSTFILE")) {
    std::ifstream in(env.Path(*file));
    if (in) {
      for (std::string line; std::getline(in, line);) {
        std::vector<std::string> words = Words(line);
        if (words.empty()) continue;
        if (words.size() != 1) {
          ThrowBadVariable("LSB_DJOB_HOSTFILE", *file,
                           "has a line that is not one host name: '" + ShownValue(line) + "'",
                           "LSF writes one host per line; unset the variable if it names another file");
        }
        tally.Add(words[0], 1);
      }
      source = "LSB_DJOB_HOSTFILE";
      std::vector<HostSlots> hosts = tally.Take();
      if (hosts.empty()) {
        ThrowBadVariable("LSB_DJOB_HOSTFILE", *file, "names a file with no hosts",
                         "LSF writes one host per line; unset the variable if it names another file");
      }
      return hosts;
    }
    if (!env.Has("LSB_MCPU_HOSTS") && !env.Has("LSB_HOSTS")) {
      ThrowBadVariable("LSB_DJOB_HOSTFILE", *file, "names a file that cannot be read",
                       "make the file visible here (containers need it mounted) or set LSB_MCPU_HOSTS");
    }
    warnings.push_back("LSB_DJOB_HOSTFILE=" + ShownValue(*file) + " cannot be read; the hosts come from " +
                       (env.Has("LSB_MCPU_HOSTS") ? "LSB_MCPU_HOSTS" : "LSB_HOSTS"));
  }
  if (const std::string* mcpu = env.Get("LSB_MCPU_HOSTS")) {
    std::vector<std::string> words = Words(*mcpu);
    if (words.empty() || words.size() % 2 != 0) {
      ThrowBadVariable("LSB_MCPU_HOSTS", *mcpu, "is not a list of 'host slots' pairs",
                       "LSF sets it as 'hostA 1 hostB 42'; unset it if it was copied from another job");
    }
    for (size_t i = 0; i < words.size(); i += 2) {
      int slots = ParseCount("LSB_MCPU_HOSTS", words[i + 1]);
      RequirePositive("LSB_MCPU_HOSTS slot count", slots);
      tally.Add(words[i], slots);
    }
    source = "LSB_MCPU_HOSTS";
    return tally.Take();
  }
  if (const std::string* list = env.Get("LSB_HOSTS")) {
    std::vector<std::string> words = Words(*list);
    for (const std::string& w : words) tally.Add(w, 1);
    if (words.empty()) {
      ThrowBadVariable("LSB_HOSTS", *list, "names no hosts", "unset it if it was copied from another job");
    }
    source = "LSB_HOSTS";
  }
  return tally.Take();
}

// The compute hosts: without the launch node that CSM lists first with a single slot.
std::vector<std::string> ComputeHosts(std::vector<HostSlots> slots) {
  bool launch_node_first =
      slots.size() >= 2 && slots.front().slots == 1 &&
      std::all_of(slots.begin() + 1, slots.end(), [](const HostSlots& h) { return h.slots > 1; });
  if (launch_node_first) slots.erase(slots.begin());
  std::vector<std::string> hosts;
  for (const HostSlots& h : slots) hosts.push_back(h.host);
  return hosts;
}

std::string_view ShortName(std::string_view host) { return host.substr(0, host.find('.')); }

std::vector<std::string> Missing(const Environment& env) {
  std::vector<std::string> missing =
      AbsentVariables(env, {"JSM_NAMESPACE_RANK", "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_LOCAL_RANK",
                            "JSM_NAMESPACE_LOCAL_SIZE", "LSB_JOBID"});
  // `jsrun flux start` hands its JSM_* variables to every Flux job inside; the flux method reads those.
  if (missing.empty() && LaunchedByFlux(env)) {
    missing.emplace_back(
        "a jsrun of this process's own (FLUX_TASK_RANK is set: Flux launched it, and the "
        "JSM_* variables belong to the Flux instance)");
  }
  return missing;
}

Topology Detect(const Environment& env) {
  Topology t;
  t.method = "lsf";
  MpiRanks ranks = ReadMpiRanks(env, "JSM_NAMESPACE_SIZE", "JSM_NAMESPACE_RANK", "JSM_NAMESPACE_LOCAL_RANK",
                                "JSM_NAMESPACE_LOCAL_SIZE");
  const std::string& job = *env.Get("LSB_JOBID");
  ParseJobNumber("LSB_JOBID", job);  // only validated: the id is used as written
  t.job_id = job;
  // Two jsruns of one batch job run at once; each has its own PMIx namespace.
  std::string identity = job;
  if (const std::string* ns = env.Get("PMIX_NAMESPACE"); ns != nullptr && !ns->empty()) identity += "/" + *ns;
  t.coordinator_port = HashedCoordinatorPort(identity);

  std::string source;
  std::vector<std::string> hosts = ComputeHosts(ReadHostSlots(env, source, t.warnings));
  if (ranks.local_size == ranks.size || hosts.empty()) {
    // One node (loopback), or no host list (the MPI probe has to find rank 0's host).
    FillFromMpiRanks(ranks, std::nullopt, "", env, t);
    if (ranks.local_size == ranks.size && hosts.size() == 1) t.hosts = hosts;
    return t;
  }

  // The ranks span hosts, and jsrun fills the allocation's compute hosts in order.
  FillMpiTasks(ranks, t);
  if (ranks.size % ranks.local_size == 0 &&
      static_cast<size_t>(ranks.size / ranks.local_size) < hosts.size()) {
    size_t used = static_cast<size_t>(ranks.size / ranks.local_size);
    t.warnings.push_back(std::to_string(ranks.size) + " ranks with " + std::to_string(ranks.local_size) +
                         " per node fill " + std::to_string(used) + " of the " +
                         std::to_string(hosts.size()) + " hosts in " + source +
                         "; assuming jsrun uses the first " + std::to_string(used));
    hosts.resize(used);
  }
  t.hosts = hosts;
  t.num_nodes = static_cast<int>(hosts.size());
  t.coordinator_host = hosts.front();

  auto self = std::find(hosts.begin(), hosts.end(), env.hostname);
  if (self == hosts.end()) {
    self = std::find_if(hosts.begin(), hosts.end(),
                        [&](const std::string& h) { return ShortName(h) == ShortName(env.hostname); });
  }
  if (self != hosts.end()) {
    t.node_rank = static_cast<int>(self - hosts.begin());
  } else if (t.num_nodes == ranks.size) {
    t.node_rank = ranks.rank;
  } else {
    t.node_rank = 0;
    t.warnings.push_back("this host (" + env.hostname + ") is not among the hosts in " + source +
                         "; its node rank is unknown");
  }
  return t;
}

}  // namespace

Detector LsfDetector() { return {"lsf", Missing, Detect}; }

}  // namespace distrun
