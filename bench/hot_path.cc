#include "hot_path.h"

namespace distrun::bench {

std::vector<std::string> LaunchEnv() {
  return {"PATH=/usr/bin:/bin", "HOME=/tmp", "OMPI_MCA_plm_rsh_agent=", "OMPI_ALLOW_RUN_AS_ROOT=1",
          "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"};
}

std::vector<std::string> DistrunLaunch(const std::string& distrun, int nproc) {
  return {distrun, "--nproc-per-node", std::to_string(nproc), "--", "/bin/true"};
}

std::vector<std::string> MpiexecLaunch(int nproc) {
  return {"/usr/bin/mpiexec.mpich", "-n", std::to_string(nproc), "/bin/true"};
}

std::vector<std::string> SlurmStep512Env() {
  return {"PATH=/usr/bin:/bin",
          "SLURM_JOB_ID=48213",
          "SLURM_STEP_ID=0",
          "SLURM_STEP_NODELIST=gpu-a[001-032],gpu-b[001-016],gpu-c[0001-0016]",
          "SLURM_STEP_NUM_NODES=64",
          "SLURM_STEP_NUM_TASKS=512",
          "SLURM_STEP_TASKS_PER_NODE=8(x64)",
          "SLURM_NTASKS=512",
          "SLURM_PROCID=300",
          "SLURM_LOCALID=4",
          "SLURM_NODEID=37",
          "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7",
          "SLURM_JOB_NODELIST=gpu-a[001-032],gpu-b[001-016],gpu-c[0001-0016]"};
}

std::vector<std::string> DistrunDetect(const std::string& distrun) {
  return {distrun, "--detect", "--format", "json"};
}

}  // namespace distrun::bench
