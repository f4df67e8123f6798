// Open MPI: a rank started by mpirun. 4.x (ORTE) exports OMPI_MCA_orte_hnp_uri, 5.x (PRRTE) PRTE_LAUNCHED=1
// and PMIX_NAMESPACE; both export OMPI_COMM_WORLD_{SIZE,RANK,LOCAL_RANK,LOCAL_SIZE}.
//
// OMPI_COMM_WORLD_NODE_RANK is deliberately not read: Open MPI documents it as this process's rank on the
// node across all jobs (a local rank), not the index of the node, so it cannot give the node rank.
#include <cctype>

#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/mpi_env.h"
#include "detect/parse.h"

namespace distrun {
namespace {

constexpr std::string_view kHnpUri = "OMPI_MCA_orte_hnp_uri";

bool IsOpenMpi5(const Environment& env) {
  return env.GetOr("PRTE_LAUNCHED", "") == "1" && env.Has("PMIX_NAMESPACE");
}

bool AllDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

bool IsIpv4(std::string_view s) {
  std::vector<std::string> parts = Split(s, '.');
  if (parts.size() != 4) return false;
  for (const std::string& p : parts) {
    if (!AllDigits(p) || p.size() > 3 || std::stoi(p) > 255) return false;
  }
  return true;
}

// An IPv6 literal, with an optional zone ("fe80::1%eth0").
bool IsIpv6(std::string_view s) {
  size_t percent = s.find('%');
  std::string_view addr = s.substr(0, percent);
  if (percent != std::string_view::npos) {
    std::string_view zone = s.substr(percent + 1);
    if (zone.empty()) return false;
    for (char c : zone) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.') return false;
    }
  }
  return addr.find(':') != std::string_view::npos &&
         addr.find_first_not_of("0123456789abcdefABCDEF:.") == std::string_view::npos;
}

bool IsPort(std::string_view s) {
  if (!AllDigits(s) || s.size() > 5) return false;
  int port = std::stoi(std::string(s));
  return port >= 1 && port <= 65535;
}

// One contact of mpirun: "tcp://ip1,ip2:port" or "tcp6://[a,b]:port"; other transports ("scheme://...")
// are accepted as long as they are not empty.
bool IsContact(std::string_view field) {
  size_t sep = field.find("://");
  if (sep == std::string_view::npos || sep == 0) return false;
  std::string_view scheme = field.substr(0, sep);
  for (char c : scheme) {
    if (!std::islower(static_cast<unsigned char>(c)) && !std::isdigit(static_cast<unsigned char>(c)))
      return false;
  }
  std::string_view body = field.substr(sep + 3);
  if (scheme != "tcp" && scheme != "tcp6") return !body.empty();
  size_t colon = body.rfind(':');
  if (colon == std::string_view::npos || !IsPort(body.substr(colon + 1))) return false;
  std::string_view addrs = body.substr(0, colon);
  if (scheme == "tcp6") {
    if (addrs.size() < 3 || addrs.front() != '[' || addrs.back() != ']') return false;
    addrs = addrs.substr(1, addrs.size() - 2);
  }
  for (const std::string& addr : Split(addrs, ',')) {
    if (scheme == "tcp" ? !IsIpv4(addr) : !IsIpv6(addr)) return false;
  }
  return true;
}

// "<jobid>.<vpid>;tcp://ip1,ip2:port;tcp6://[a,b]:port" → jobid (mpirun's job family, the same in every
// rank of one mpirun).
std::string HnpJobId(std::string_view value) {
  std::vector<std::string> fields = Split(value, ';');
  std::vector<std::string> name = Split(fields.front(), '.');
  bool ok = fields.size() >= 2 && name.size() == 2 && AllDigits(name[0]) && AllDigits(name[1]);
  for (size_t i = 1; ok && i < fields.size(); ++i) ok = IsContact(fields[i]);
  if (!ok) {
    ThrowBadVariable(kHnpUri, value, "is not <jobid>.<vpid>;tcp://ip[,ip]:port[;tcp6://[ip,...]:port]",
                     "Open MPI's mpirun sets it; unset it if it was copied from another job or shell");
  }
  return name[0];
}

std::vector<std::string> Missing(const Environment& env) {
  std::vector<std::string> missing;
  if (!env.Has("OMPI_COMM_WORLD_SIZE")) missing.emplace_back("OMPI_COMM_WORLD_SIZE");
  if (!env.Has(kHnpUri) && !IsOpenMpi5(env)) {
    missing.emplace_back(
        "OMPI_MCA_orte_hnp_uri (Open MPI 4) or PRTE_LAUNCHED=1 with PMIX_NAMESPACE (Open MPI 5)");
  }
  return missing;
}

Topology Detect(const Environment& env) {
  Topology t;
  t.method = "ompi";
  MpiRanks ranks = ReadMpiRanks(env, "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                                "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE");
  RequireSameIfSet(env, "PMIX_RANK", ranks.rank, "OMPI_COMM_WORLD_RANK");

  // The PMIx namespace names this job in both versions; 4.x's hnp jobid is the fallback.
  std::string identity;
  if (const std::string* uri = env.Get(kHnpUri)) identity = HnpJobId(*uri);
  if (const std::string* ns = env.Get("PMIX_NAMESPACE"); ns != nullptr && !ns->empty()) identity = *ns;
  if (!identity.empty()) {
    t.job_id = identity;
    t.coordinator_port = HashedCoordinatorPort(identity);
  }

  FillFromMpiRanks(ranks, OptionalInt(env, "OMPI_MCA_orte_num_nodes"), "OMPI_MCA_orte_num_nodes", env, t);
  return t;
}

}  // namespace

Detector OmpiDetector() { return {"ompi", Missing, Detect}; }

}  // namespace distrun
