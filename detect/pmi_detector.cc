// The PMI family of launchers: MPICH/Hydra and Intel MPI (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID,
// MPI_LOCALNRANKS), MVAPICH (MV2_COMM_WORLD_*, MVAPICH 3: MVP_COMM_WORLD_*), HPE Cray PALS (PALS_RANKID,
// PALS_LOCAL_RANKID, PALS_NODEID) and Cray PMI (PMI_LOCAL_RANK, PMI_LOCAL_SIZE), and Slurm's
// `srun --mpi=pmi2` (PMI_RANK, PMI_SIZE, PMI_JOBID beside the step's SLURM_* variables).
//
// Variables that prove nothing alone are not claimed: PMI_RANK/PMI_SIZE/PMI_FD are also Flux's own PMI,
// and PALS_RANKID without PALS_LOCAL_RANKID comes from Slurm's and Flux's Cray plugins; the slurm and
// flux methods read those jobs. `srun --mpi=pmix` sets only PMIX_* variables: the slurm method reads it.
#include "detect/coordinator_port.h"
#include "detect/detector.h"
#include "detect/detector_util.h"
#include "detect/errors.h"
#include "detect/mpi_env.h"
#include "detect/parse.h"
#include "detect/slurm_step.h"

namespace distrun {
namespace {

enum class Family { kNone, kPals, kHydra, kMvapich2, kMvapich3, kCrayPmi, kSlurmPmi2 };

// The first of two variables that is set, or the first name when neither is (for the error message).
std::string_view FirstSet(const Environment& env, std::string_view a, std::string_view b) {
  return env.Has(a) || !env.Has(b) ? a : b;
}

Family Classify(const Environment& env) {
  const bool pmi = env.Has("PMI_RANK") && env.Has("PMI_SIZE");
  if (env.Has("PALS_RANKID") && env.Has("PALS_LOCAL_RANKID")) return Family::kPals;
  if (pmi && env.Has("MPI_LOCALRANKID")) return Family::kHydra;
  if (env.Has("MV2_COMM_WORLD_RANK") && env.Has("MV2_COMM_WORLD_SIZE")) return Family::kMvapich2;
  if (env.Has("MVP_COMM_WORLD_RANK") && env.Has("MVP_COMM_WORLD_SIZE")) return Family::kMvapich3;
  if (pmi && env.Has("PMI_LOCAL_RANK")) return Family::kCrayPmi;
  if (pmi && env.Has("PMI_JOBID") && env.Has("SLURM_STEP_NODELIST") && !LaunchedByFlux(env)) {
    return Family::kSlurmPmi2;
  }
  return Family::kNone;
}

// The variables holding this process's rank and the job size for a family.
std::pair<std::string_view, std::string_view> RankAndSize(const Environment& env, Family family) {
  switch (family) {
    case Family::kPals:
      return {"PALS_RANKID", FirstSet(env, "PMI_SIZE", "PALS_SIZE")};
    case Family::kMvapich2:
      return {"MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE"};
    case Family::kMvapich3:
      return {"MVP_COMM_WORLD_RANK", "MVP_COMM_WORLD_SIZE"};
    default:
      return {"PMI_RANK", "PMI_SIZE"};
  }
}

// A Flux job's tasks carry Flux's own PMI_RANK/PMI_SIZE (and with its Cray plugin, PALS_*): when they
// equal FLUX_TASK_RANK/FLUX_JOB_SIZE, Flux started this process. An mpiexec inside a Flux batch job gives
// its ranks other values and stays here.
bool IsFluxOwnPmi(const Environment& env, Family family) {
  if (!LaunchedByFlux(env)) return false;
  auto [rank_var, size_var] = RankAndSize(env, family);
  return env.GetOr(rank_var, "") == env.GetOr("FLUX_TASK_RANK", "") &&
         env.GetOr(size_var, "") == env.GetOr("FLUX_JOB_SIZE", "");
}

std::vector<std::string> Missing(const Environment& env) {
  Family family = Classify(env);
  if (family != Family::kNone) {
    if (!IsFluxOwnPmi(env, family)) return {};
    return {
        "PMI variables of a launcher other than Flux (they equal FLUX_TASK_RANK and FLUX_JOB_SIZE: "
        "Flux started this process, and the flux method reads it)"};
  }
  std::vector<std::string> missing;
  if (env.Has("PALS_RANKID")) {
    missing.emplace_back("PALS_LOCAL_RANKID (PALS_RANKID alone is set by Slurm's and Flux's Cray plugins)");
  } else if (env.Has("MV2_COMM_WORLD_RANK")) {
    missing.emplace_back("MV2_COMM_WORLD_SIZE");
  } else if (env.Has("MVP_COMM_WORLD_RANK")) {
    missing.emplace_back("MVP_COMM_WORLD_SIZE");
  } else if (env.Has("PMI_RANK") || env.Has("PMI_SIZE")) {
    for (const char* name : {"PMI_RANK", "PMI_SIZE"}) {
      if (!env.Has(name)) missing.emplace_back(name);
    }
    missing.emplace_back(LaunchedByFlux(env)
                             ? "MPI_LOCALRANKID or PMI_LOCAL_RANK (FLUX_TASK_RANK is set: Flux's own PMI is "
                               "read by the flux method)"
                             : "MPI_LOCALRANKID (MPICH, Intel MPI), PMI_LOCAL_RANK (Cray PMI) or PMI_JOBID "
                               "with SLURM_STEP_NODELIST (srun --mpi=pmi2)");
  } else {
    missing.emplace_back(
        "PMI_RANK and PMI_SIZE (MPICH, Intel MPI, Cray PMI, srun --mpi=pmi2), PALS_RANKID (Cray PALS) or "
        "MV2_COMM_WORLD_RANK / MVP_COMM_WORLD_RANK (MVAPICH)");
  }
  return missing;
}

// srun --mpi=pmi2: the step's SLURM_* variables say everything the slurm method would, including the
// hosts; PMI's copies of rank and size must agree with them.
void DetectSlurmPmi2(const Environment& env, Topology& t) {
  SlurmStep step = ReadSlurmStep(env);
  RequireSameIfSet(env, "PMI_RANK", step.task_id, "SLURM_PROCID");
  RequireSameIfSet(env, "PMI_SIZE", step.num_tasks, "SLURM_STEP_NUM_TASKS");
  FillFromSlurmStep(step, t);
}

void DetectPals(const Environment& env, Topology& t) {
  for (auto [a, b] : {std::pair{"PMI_SIZE", "PALS_SIZE"}, std::pair{"PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"}}) {
    if (!env.Has(a) && !env.Has(b)) {
      throw UsageError(std::string(a) + " or " + b +
                       " is not set but PALS_RANKID is; the launcher should set both, so run distrun under "
                       "mpiexec or pick another method");
    }
  }
  MpiRanks ranks = ReadMpiRanks(env, FirstSet(env, "PMI_SIZE", "PALS_SIZE"), "PALS_RANKID",
                                "PALS_LOCAL_RANKID", FirstSet(env, "PMI_LOCAL_SIZE", "PALS_LOCAL_SIZE"));
  RequireSameIfSet(env, "PMI_RANK", ranks.rank, "PALS_RANKID");
  RequireSameIfSet(env, "PMI_LOCAL_RANK", ranks.local_rank, "PALS_LOCAL_RANKID");
  FillFromMpiRanks(ranks, std::nullopt, "", env, t);
  if (std::optional<int> node = OptionalInt(env, "PALS_NODEID")) {
    if (ranks.local_size == ranks.size && *node != 0) {
      ThrowBadVariable("PALS_NODEID", *env.Get("PALS_NODEID"),
                       "names another node but every rank runs on this one",
                       "the PALS_* variables disagree; unset copies of them left from another job");
    }
    t.node_rank = *node;
  }
  if (const std::string* apid = env.Get("PALS_APID"); apid != nullptr && !apid->empty()) {
    t.job_id = *apid;
    t.coordinator_port = HashedCoordinatorPort(*apid);
  }
}

Topology Detect(const Environment& env) {
  Topology t;
  t.method = "pmi";
  Family family = Classify(env);
  switch (family) {
    case Family::kSlurmPmi2:
      DetectSlurmPmi2(env, t);
      break;
    case Family::kPals:
      DetectPals(env, t);
      break;
    case Family::kHydra: {
      // Hydra exports no job identity. On one host every rank is a child of the same hydra_pmi_proxy, so
      // the parent's pid names the job there; across hosts the MPI probe hands out the port instead.
      MpiRanks ranks = ReadMpiRanks(env, "PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS");
      FillFromMpiRanks(ranks, std::nullopt, "", env, t);
      if (ranks.local_size == ranks.size && env.parent_pid > 1) {
        t.job_id = "hydra-" + env.hostname + "-" + std::to_string(env.parent_pid);
        t.coordinator_port = HashedCoordinatorPort(t.job_id);
      }
      break;
    }
    case Family::kMvapich2:
    case Family::kMvapich3: {
      std::string p = family == Family::kMvapich2 ? "MV2_COMM_WORLD_" : "MVP_COMM_WORLD_";
      MpiRanks ranks = ReadMpiRanks(env, p + "SIZE", p + "RANK", p + "LOCAL_RANK", p + "LOCAL_SIZE");
      RequireSameIfSet(env, "PMI_RANK", ranks.rank, p + "RANK");
      FillFromMpiRanks(ranks, std::nullopt, "", env, t);
      break;
    }
    case Family::kCrayPmi: {
      MpiRanks ranks = ReadMpiRanks(env, "PMI_SIZE", "PMI_RANK", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE");
      FillFromMpiRanks(ranks, std::nullopt, "", env, t);
      break;
    }
    case Family::kNone:
      throw UsageError(
          "no PMI launcher variables are set (PMI_RANK, PALS_RANKID, MV2_COMM_WORLD_RANK); "
          "run distrun under mpiexec or srun --mpi=pmi2, or pick another method");
  }
  return t;
}

}  // namespace

Detector PmiDetector() { return {"pmi", Missing, Detect}; }

}  // namespace distrun
