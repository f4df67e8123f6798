#include "launcher/plan/task_variables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "test_support.h"

namespace distrun {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::LoadFixtureEnv;
using testing::MakeEnv;

std::map<std::string, std::string> SetOf(const TaskVariableChanges& c) {
  std::map<std::string, std::string> m;
  for (const auto& [name, value] : c.set) EXPECT_TRUE(m.emplace(name, value).second) << name;
  return m;
}

// Task `task` of a Slurm step with `tasks` tasks, one per node (the per-node layout).
Topology SlurmNodeTask(int task, int tasks) {
  Topology t;
  t.method = "slurm";
  t.launch_mode = LaunchMode::kPerNode;
  t.num_nodes = tasks;
  t.node_rank = task;
  t.num_tasks = tasks;
  t.task_id = task;
  return t;
}

// What srun -N3 --ntasks-per-node=1 --mpi=pmix gives the task on the second node.
Environment SlurmPerNodeStep() {
  return MakeEnv({{"SLURM_JOB_ID", "77"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_PROCID", "1"},
                  {"SLURM_NTASKS", "3"},
                  {"SLURM_NPROCS", "3"},
                  {"SLURM_STEP_NUM_TASKS", "3"},
                  {"SLURM_STEP_NUM_NODES", "3"},
                  {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_STEP_TASKS_PER_NODE", "1(x3)"},
                  {"SLURM_GTIDS", "1"},
                  {"SLURM_STEP_NODELIST", "node[1-3]"},
                  {"SLURM_MPI_TYPE", "pmix"},
                  {"PMIX_RANK", "1"},
                  {"PMIX_NAMESPACE", "slurm.pmix.77.0"},
                  {"PMIX_SERVER_URI21", "pmix-server.4242;tcp4://127.0.0.1:4711"},
                  {"PMIX_MCA_gds", "hash"}});
}

TEST(TaskVariables, AWorkerOfAPerNodeStepSeesTheTaskVariablesAPerTaskStepWouldGiveIt) {
  // Node 1 of 3 runs ranks 2 and 3 of 6; this is rank 3.
  WorkerPlace place{3, 6, 1, 2, 1, 3, 2};
  TaskVariableChanges c = TaskVariablesFor(SlurmPerNodeStep(), SlurmNodeTask(1, 3), 2, place);
  EXPECT_EQ(SetOf(c), (std::map<std::string, std::string>{{"SLURM_PROCID", "3"},
                                                          {"SLURM_NTASKS", "6"},
                                                          {"SLURM_NPROCS", "6"},
                                                          {"SLURM_STEP_NUM_TASKS", "6"},
                                                          {"SLURM_LOCALID", "1"},
                                                          {"SLURM_NTASKS_PER_NODE", "2"},
                                                          {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
                                                          {"SLURM_GTIDS", "2,3"}}));
  // SLURM_NODEID and SLURM_STEP_NUM_NODES were right already; the job's identity and srun's --mpi stay.
  // PMIx would make the worker join as the distrun's rank: gone, but for the user's component tuning.
  // Open MPI would take a process with the step's id for a task srun started, and abort without its PMIx.
  EXPECT_THAT(c.unset, ElementsAre("PMIX_NAMESPACE", "PMIX_RANK", "PMIX_SERVER_URI21", "SLURM_STEP_ID"));
}

TEST(TaskVariables, NodesWithDifferentWorkerCountsLoseTheCountsTheyCannotState) {
  // 5 workers on 3 nodes: this node runs ranks 2 and 3.
  WorkerPlace place{2, 5, 0, 2, 1, 3, 2};
  TaskVariableChanges c = TaskVariablesFor(SlurmPerNodeStep(), SlurmNodeTask(1, 3), 2, place);
  EXPECT_EQ(SetOf(c).count("SLURM_STEP_TASKS_PER_NODE"), 0u);
  EXPECT_THAT(c.unset, ::testing::Contains("SLURM_STEP_TASKS_PER_NODE"));
  EXPECT_EQ(SetOf(c)["SLURM_GTIDS"], "2,3");
}

TEST(TaskVariables, TheLaunchersOwnTaskKeepsItsVariables) {
  // srun --ntasks-per-node=2: each distrun runs the task's one worker, and MPI_Init in it joins srun's job.
  Topology t = SlurmNodeTask(1, 3);
  t.launch_mode = LaunchMode::kPerTask;
  WorkerPlace place{1, 3, 0, 1, 1, 3, -1};
  EXPECT_TRUE(WorkerIsLauncherTask(t, 1, place));
  TaskVariableChanges c = TaskVariablesFor(SlurmPerNodeStep(), t, 1, place);
  EXPECT_THAT(c.set, IsEmpty());
  EXPECT_THAT(c.unset, IsEmpty());
  // One worker per node whose rank and world are the task's: the same.
  EXPECT_TRUE(TaskVariablesFor(SlurmPerNodeStep(), SlurmNodeTask(1, 3), 1, place).unset.empty());
}

TEST(TaskVariables, AnEpochThatRenumberedTheRanksRewritesEvenAPerTaskWorker) {
  // Per-task elastic job: host 0 was lost, and task 1 is now rank 0 of 2.
  Topology t = SlurmNodeTask(1, 3);
  t.launch_mode = LaunchMode::kPerTask;
  WorkerPlace place{0, 2, 0, 1, 0, 2, -1};
  EXPECT_FALSE(WorkerIsLauncherTask(t, 1, place));
  TaskVariableChanges c = TaskVariablesFor(SlurmPerNodeStep(), t, 1, place);
  auto set = SetOf(c);
  EXPECT_EQ(set["SLURM_PROCID"], "0");
  EXPECT_EQ(set["SLURM_NTASKS"], "2");
  EXPECT_EQ(set["SLURM_NODEID"], "0");
  EXPECT_EQ(set["SLURM_STEP_TASKS_PER_NODE"], "1(x2)");
  // This node's other ranks are not known in a per-task layout.
  EXPECT_THAT(c.unset, ::testing::Contains("SLURM_GTIDS"));
  EXPECT_THAT(c.unset, ::testing::Contains("PMIX_RANK"));
}

TEST(TaskVariables, OpenMpisVariablesLeaveAWorkerOfMpirunNp1) {
  // mpirun -np 1 distrun --nproc-per-node 3, as recorded from Open MPI 4.1.
  Environment env = LoadFixtureEnv("mpi-standalone/ompi-env-rank0.txt");
  env.vars["OMPI_MCA_btl_tcp_if_include"] = "lo";  // the user's tuning stays
  Topology t;
  t.method = "ompi";
  t.num_tasks = 1;
  WorkerPlace place{2, 3, 2, 3, 0, 1, 0};
  TaskVariableChanges c = TaskVariablesFor(env, t, 3, place);
  EXPECT_THAT(c.set, IsEmpty());  // no scheduler's task variables here
  for (const auto& [name, value] : env.vars) {
    const bool launcher = name.starts_with("OMPI_COMM_WORLD_") ||
                          (name.starts_with("PMIX_") && !name.starts_with("PMIX_MCA_")) ||
                          name == "OMPI_MCA_orte_hnp_uri" || name == "OMPI_MCA_ess_base_vpid";
    if (launcher) {
      EXPECT_THAT(c.unset, ::testing::Contains(name));
    }
  }
  EXPECT_THAT(c.unset, ::testing::Not(::testing::Contains("OMPI_MCA_btl_tcp_if_include")));
  EXPECT_THAT(c.unset, ::testing::Not(::testing::Contains("PMIX_MCA_mca_base_component_show_load_errors")));
  for (const std::string& name : c.unset) EXPECT_TRUE(env.Has(name)) << name;
}

TEST(TaskVariables, HydrasVariablesLeaveToo) {
  Environment env = LoadFixtureEnv("mpi-standalone/mpich-env-rank2.txt");
  Topology t;
  t.method = "pmi";
  t.num_tasks = 4;
  t.task_id = 2;
  TaskVariableChanges c = TaskVariablesFor(env, t, 2, WorkerPlace{4, 8, 0, 2, 2, 4, 4});
  EXPECT_THAT(c.unset, ::testing::IsSupersetOf({"PMI_FD", "PMI_RANK", "PMI_SIZE"}));
}

TEST(TaskVariables, SchedulersOtherThanSlurmAreRewrittenWhereTheyAreSet) {
  Environment env = MakeEnv({{"JSM_NAMESPACE_RANK", "1"},
                             {"JSM_NAMESPACE_SIZE", "2"},
                             {"JSM_NAMESPACE_LOCAL_RANK", "0"},
                             {"JSM_NAMESPACE_LOCAL_SIZE", "1"},
                             {"FLUX_TASK_RANK", "1"},
                             {"FLUX_JOB_SIZE", "2"}});
  Topology t;
  t.num_tasks = 2;
  t.task_id = 1;
  auto set = SetOf(TaskVariablesFor(env, t, 4, WorkerPlace{5, 8, 1, 4, 1, 2, 4}));
  EXPECT_EQ(set, (std::map<std::string, std::string>{{"JSM_NAMESPACE_RANK", "5"},
                                                     {"JSM_NAMESPACE_SIZE", "8"},
                                                     {"JSM_NAMESPACE_LOCAL_RANK", "1"},
                                                     {"JSM_NAMESPACE_LOCAL_SIZE", "4"},
                                                     {"FLUX_TASK_RANK", "5"},
                                                     {"FLUX_JOB_SIZE", "8"}}));
}

TEST(TaskVariables, AWorkstationGainsNoSlurmVariables) {
  Topology t;
  t.method = "local";
  TaskVariableChanges c =
      TaskVariablesFor(MakeEnv({{"HOME", "/root"}}), t, 4, WorkerPlace{1, 4, 1, 4, 0, 1, 0});
  EXPECT_THAT(c.set, IsEmpty());
  EXPECT_THAT(c.unset, IsEmpty());
}

TEST(TaskVariables, TheMpiVariablesAreTheLaunchersNotTheUsersTuning) {
  for (const char* name : {"PMIX_RANK", "PMIX_SERVER_URI41", "PMI_FD", "PMI_PORT", "OMPI_COMM_WORLD_RANK",
                           "OMPI_MCA_orte_hnp_uri", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_pmix",
                           "MPI_LOCALRANKID", "PALS_RANKID", "MV2_COMM_WORLD_RANK", "PRTE_LAUNCHED",
                           "OMPI_UNIVERSE_SIZE", "HYDI_CONTROL_FD", "SLURM_STEP_ID", "SLURM_STEPID"}) {
    EXPECT_TRUE(IsMpiLauncherVariable(name)) << name;
  }
  for (const char* name :
       {"PMIX_MCA_gds", "OMPI_MCA_btl", "OMPI_MCA_pml_ucx_tls", "I_MPI_FABRICS", "MPIR_CVAR_CH4_NETMOD",
        "SLURM_MPI_TYPE", "UCX_TLS", "SLURM_JOB_ID", "SLURM_NODELIST"}) {
    EXPECT_FALSE(IsMpiLauncherVariable(name)) << name;
  }
}

}  // namespace
}  // namespace distrun
