// Kubernetes Indexed Jobs and JobSets: one pod per node and one distrun per pod (per-node).
//
// The Job controller gives each pod of an Indexed Job JOB_COMPLETION_INDEX and the hostname
// "<job>-<index>". Other pods reach it as "<job>-<index>.<subdomain>" only when the pod template names a
// headless Service as `subdomain`. A JobSet's Jobs are "<jobset>-<rjob>-<jobIndex>", so its pods are
// "<jobset>-<rjob>-<jobIndex>-<podIndex>", and the subdomain defaults to the JobSet's name.
//
// JobSet injects no variables, only labels and annotations; the conventional names, exposed with the
// downward API (fieldRef metadata.annotations['…']), are read here:
//   JOBSET_NAME             jobset.sigs.k8s.io/jobset-name
//   REPLICATED_JOB_NAME     jobset.sigs.k8s.io/replicatedjob-name
//   REPLICATED_JOB_REPLICAS jobset.sigs.k8s.io/replicatedjob-replicas
//   JOB_INDEX               jobset.sigs.k8s.io/job-index (else read from the hostname)
// A distrun job spans the pods of one ReplicatedJob: node rank = JOB_INDEX × pods per Job +
// JOB_COMPLETION_INDEX.
//
// Nothing a pod can read says how many pods its Job has (completions is not in the downward API), so
// the count is DISTRUN_NUM_NODES, else PET_NNODES (set by Kubeflow Trainer, whose TrainJobs are JobSets).
#include <fstream>
#include <optional>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/parse.h"

namespace distrun {
namespace {

std::vector<std::string> Missing(const Environment& env) {
  if (env.Has("JOB_COMPLETION_INDEX")) return {};
  return {"JOB_COMPLETION_INDEX"};
}

// A count and the words messages use for where it came from.
struct NodeCount {
  int count = 0;
  std::string origin;
};

NodeCount ReadNodeCount(const Environment& env) {
  if (const std::string* v = env.Get("DISTRUN_NUM_NODES")) {
    int n = ParseCount("DISTRUN_NUM_NODES", *v);
    if (n == 0)
      throw UsageError("DISTRUN_NUM_NODES=0 is not a node count; set it to the number of pods (1 or more)");
    return {n, "DISTRUN_NUM_NODES=" + *v};
  }
  if (const std::string* v = env.Get("PET_NNODES")) {
    // torchrun's --nnodes: "N" or "MIN:MAX"; only a fixed size says how many pods there are.
    std::vector<std::string> range = Split(*v, ':');
    if (range.size() == 2 && range[0] == range[1]) range.pop_back();
    if (range.size() != 1) {
      throw UsageError("PET_NNODES='" + ShownValue(*v) +
                       "' is an elastic range, so the number of pods is not fixed; set " +
                       "DISTRUN_NUM_NODES to the number of pods in the Job");
    }
    int n = ParseCount("PET_NNODES", range[0]);
    if (n == 0)
      throw UsageError("PET_NNODES=0 is not a node count; set DISTRUN_NUM_NODES to the number of pods");
    return {n, "PET_NNODES=" + *v};
  }
  throw UsageError(
      "JOB_COMPLETION_INDEX=" + env.GetOr("JOB_COMPLETION_INDEX", "") +
      " shows a Kubernetes Indexed Job, but nothing says how many pods it has; set DISTRUN_NUM_NODES "
      "to the Job's completions (times the replicas of a JobSet's ReplicatedJob) in the pod template, or "
      "pass --num-nodes");
}

// The pod's own hostname and, where it can be seen, its subdomain.
struct PodName {
  std::string hostname;   // "<job>-<index>", without any domain
  std::string subdomain;  // empty when unknown
  std::string subdomain_origin;
};

// The kubelet writes "<ip>\t<hostname>.<subdomain>.<namespace>.svc.<cluster-domain>\t<hostname>" into
// /etc/hosts when the pod has a subdomain.
std::string SubdomainFromHostsFile(const Environment& env, const std::string& hostname) {
  std::ifstream in(env.Path("/etc/hosts"));
  std::string line;
  const std::string prefix = hostname + ".";
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    for (std::string field : Split(line, '\t')) {
      for (const std::string& word : Split(field, ' ')) {
        if (!word.starts_with(prefix)) continue;
        std::string rest = word.substr(prefix.size());
        std::string label = rest.substr(0, rest.find('.'));
        if (!label.empty()) return label;
      }
    }
  }
  return {};
}

PodName ReadPodName(const Environment& env) {
  PodName pod;
  std::string full = !env.hostname.empty() ? env.hostname : env.GetOr("HOSTNAME", "");
  size_t dot = full.find('.');
  pod.hostname = full.substr(0, dot);
  if (const std::string* explicit_subdomain = env.Get("DISTRUN_K8S_SUBDOMAIN")) {
    if (explicit_subdomain->empty() || explicit_subdomain->find_first_of("./: \t") != std::string::npos) {
      throw UsageError(
          "DISTRUN_K8S_SUBDOMAIN='" + ShownValue(*explicit_subdomain) +
          "' is not a Service name; set it to the headless Service named in the pod's `subdomain`");
    }
    pod.subdomain = *explicit_subdomain;
    pod.subdomain_origin = "DISTRUN_K8S_SUBDOMAIN";
    return pod;
  }
  if (dot != std::string::npos) {  // setHostnameAsFQDN: "<hostname>.<subdomain>.<namespace>.svc…"
    std::string rest = full.substr(dot + 1);
    pod.subdomain = rest.substr(0, rest.find('.'));
    pod.subdomain_origin = "the pod's FQDN hostname";
  }
  if (pod.subdomain.empty() && !pod.hostname.empty()) {
    pod.subdomain = SubdomainFromHostsFile(env, pod.hostname);
    pod.subdomain_origin = "/etc/hosts";
  }
  return pod;
}

// "<job>-<index>" → "<job>"; nullopt when the hostname does not end in "-<index>".
std::optional<std::string> StripIndex(const std::string& hostname, int index) {
  std::string suffix = "-" + std::to_string(index);
  if (hostname.size() <= suffix.size() || !hostname.ends_with(suffix)) return std::nullopt;
  return hostname.substr(0, hostname.size() - suffix.size());
}

std::string WithSubdomain(const std::string& host, const std::string& subdomain) {
  return subdomain.empty() ? host : host + "." + subdomain;
}

Topology Detect(const Environment& env) {
  const int pod_index = ParseCount("JOB_COMPLETION_INDEX", *env.Get("JOB_COMPLETION_INDEX"));
  const NodeCount nodes = ReadNodeCount(env);
  const PodName pod = ReadPodName(env);
  const bool explicit_coordinator = env.Has("DISTRUN_COORDINATOR_ADDRESS");
  const std::string* jobset = env.Get("JOBSET_NAME");
  const std::string* rjob = env.Get("REPLICATED_JOB_NAME");
  const bool is_jobset = jobset != nullptr && rjob != nullptr && !jobset->empty() && !rjob->empty();

  Topology t;
  t.method = "k8s";
  t.launch_mode = LaunchMode::kPerNode;
  t.num_nodes = nodes.count;
  t.num_tasks = nodes.count;

  std::optional<std::string> job = StripIndex(pod.hostname, pod_index);
  std::string subdomain = pod.subdomain;
  // Pod hostnames of every node in node order; empty when the hostname does not follow the convention.
  std::vector<std::string> pod_hosts;

  if (is_jobset) {
    const std::string prefix = *jobset + "-" + *rjob + "-";
    const std::string expected =
        prefix + env.GetOr("JOB_INDEX", "<job index>") + "-" + std::to_string(pod_index);
    std::optional<int> job_index;
    bool hostname_matches = true;
    if (job && job->starts_with(prefix)) {
      std::string digits = job->substr(prefix.size());
      if (!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
          digits.size() < 10) {
        job_index = std::stoi(digits);
      }
    }
    if (const std::string* v = env.Get("JOB_INDEX")) {
      int from_env = ParseCount("JOB_INDEX", *v);
      if (job_index && *job_index != from_env) job_index.reset();
      if (!job_index && explicit_coordinator) {
        job_index = from_env;
        hostname_matches = false;
      }
    }
    if (!job_index) {
      throw UsageError(
          "pod hostname '" + ShownValue(pod.hostname) + "' is not '" + ShownValue(expected) +
          "' as JOBSET_NAME, REPLICATED_JOB_NAME and JOB_COMPLETION_INDEX say a JobSet pod's is; check " +
          "those variables, or set DISTRUN_COORDINATOR_ADDRESS (and JOB_INDEX) to skip the hostnames");
    }
    const std::string* replicas_value = env.Get("REPLICATED_JOB_REPLICAS");
    if (replicas_value == nullptr) {
      throw UsageError("JOBSET_NAME=" + ShownValue(*jobset) +
                       " is set but REPLICATED_JOB_REPLICAS is not; expose it in the pod " +
                       "template from metadata.annotations['jobset.sigs.k8s.io/replicatedjob-replicas']");
    }
    const int replicas = ParseCount("REPLICATED_JOB_REPLICAS", *replicas_value);
    if (replicas == 0 || nodes.count % replicas != 0) {
      throw UsageError(
          nodes.origin + " does not split evenly over REPLICATED_JOB_REPLICAS=" + *replicas_value +
          " Jobs; set DISTRUN_NUM_NODES to the pods of the whole ReplicatedJob (completions × replicas)");
    }
    const int pods_per_job = nodes.count / replicas;
    RequireBelow("JOB_INDEX", *job_index, "REPLICATED_JOB_REPLICAS", replicas);
    if (pod_index >= pods_per_job) {
      throw UsageError("JOB_COMPLETION_INDEX=" + std::to_string(pod_index) + " is not below the " +
                       std::to_string(pods_per_job) + " pods per Job that " + nodes.origin +
                       " and REPLICATED_JOB_REPLICAS=" + *replicas_value +
                       " imply; set DISTRUN_NUM_NODES to " + "completions × replicas");
    }
    t.node_rank = *job_index * pods_per_job + pod_index;
    t.job_id = *jobset + "-" + *rjob;
    if (subdomain.empty()) {
      subdomain = *jobset;  // JobSet's default network subdomain
    }
    for (int j = 0; hostname_matches && j < replicas; ++j) {
      for (int p = 0; p < pods_per_job; ++p)
        pod_hosts.push_back(prefix + std::to_string(j) + "-" + std::to_string(p));
    }
  } else {
    if (env.Has("JOB_INDEX") || env.Has("REPLICATED_JOB_REPLICAS")) {
      t.warnings.push_back(
          "JOB_INDEX or REPLICATED_JOB_REPLICAS is set but JOBSET_NAME and REPLICATED_JOB_NAME are not, so "
          "this "
          "Job alone is the distrun job; expose those two from the JobSet annotations to span every Job of "
          "the "
          "ReplicatedJob");
    }
    if (pod_index >= nodes.count) {
      throw UsageError("JOB_COMPLETION_INDEX=" + std::to_string(pod_index) + " is not below " + nodes.origin +
                       "; set DISTRUN_NUM_NODES to the Job's completions");
    }
    t.node_rank = pod_index;
    if (job) {
      t.job_id = *job;
      for (int i = 0; i < nodes.count; ++i) pod_hosts.push_back(*job + "-" + std::to_string(i));
    } else if (!explicit_coordinator && nodes.count > 1) {
      throw UsageError(
          "pod hostname '" + ShownValue(pod.hostname) + "' does not end in '-" + std::to_string(pod_index) +
          "' (JOB_COMPLETION_INDEX) as an Indexed Job pod's does, so the other pods' names are " +
          "unknown; do not override the pod's hostname, or set DISTRUN_COORDINATOR_ADDRESS "
          "(--coordinator-address)");
    }
  }
  t.task_id = t.node_rank;
  if (!t.job_id.empty()) t.coordinator_port = HashedCoordinatorPort("k8s:" + t.job_id);

  if (nodes.count == 1) {
    // Nobody else needs to resolve it.
    t.coordinator_host = pod.hostname.empty() ? "127.0.0.1" : pod.hostname;
    if (!pod.hostname.empty()) t.hosts = {pod.hostname};
  } else if (!pod_hosts.empty() && !subdomain.empty()) {
    for (const std::string& h : pod_hosts) t.hosts.push_back(WithSubdomain(h, subdomain));
    t.coordinator_host = t.hosts.front();
  } else if (!explicit_coordinator) {
    throw UsageError(
        "pod hostname '" + ShownValue(pod.hostname) + "' has no subdomain, so '" +
        (pod_hosts.empty() ? std::string("<pod 0>") : pod_hosts.front()) +
        "' cannot be resolved by the other pods; set the pod template's `subdomain` to a headless "
        "Service selecting the Job's pods (or DISTRUN_K8S_SUBDOMAIN to its name), or set "
        "DISTRUN_COORDINATOR_ADDRESS");
  }
  return t;
}

}  // namespace

Detector K8sDetector() { return {"k8s", Missing, Detect}; }

}  // namespace distrun
