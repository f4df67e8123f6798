#include "launcher/config/options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "detect/detection.h"
#include "detect/errors.h"

namespace distrun {
namespace {

using EnvVars = std::map<std::string, std::string, std::less<>>;

Options Resolve(const RawValues& flags, const EnvVars& env = {}, const RawValues& config = {}) {
  return ResolveOptions(flags, env, config);
}

RawValues Flag(const std::string& name, const std::string& value) {
  return {{name, RawValue{value, "--" + name}}};
}

// The UsageError message of `f`, or "" when it does not throw one.
template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Options, DefaultsWithNoInput) {
  Options o = Resolve({});
  EXPECT_EQ(o.topology.method, "auto");
  EXPECT_FALSE(o.topology.coordinator_address);
  EXPECT_FALSE(o.topology.coordinator_port);
  EXPECT_FALSE(o.topology.num_processes);
  EXPECT_FALSE(o.topology.process_id);
  EXPECT_FALSE(o.topology.num_nodes);
  EXPECT_FALSE(o.topology.node_rank);
  EXPECT_FALSE(o.topology.local_device_ids);
  EXPECT_EQ(o.nproc_per_node, "auto");
  EXPECT_FALSE(o.launch_mode);
  EXPECT_EQ(o.gpus_per_worker, 1);
  EXPECT_TRUE(o.device_binding);
  EXPECT_TRUE(o.export_torch);
  EXPECT_TRUE(o.export_jax);
  EXPECT_TRUE(o.export_keras);
  EXPECT_TRUE(o.export_distrun);
  EXPECT_FALSE(o.run_id);
  EXPECT_EQ(o.max_restarts, 0);
  EXPECT_EQ(o.format, DetectFormat::kText);
  EXPECT_EQ(o.log_level, "info");
  EXPECT_FALSE(o.jax_coordinator_host);
  EXPECT_FALSE(o.jax_coordinator_port);
  EXPECT_TRUE(o.command.empty());
}

TEST(Options, EffectiveListsEveryDefaultedOptionAsDefault) {
  Options o = Resolve({});
  for (const OptionSpec& spec : OptionTable()) {
    auto it = o.effective.find(spec.name);
    if (spec.default_value == nullptr) {
      EXPECT_EQ(it, o.effective.end()) << spec.name;
    } else {
      ASSERT_NE(it, o.effective.end()) << spec.name;
      EXPECT_EQ(it->second.value, spec.default_value) << spec.name;
      EXPECT_EQ(it->second.source, OptionSource::kDefault) << spec.name;
    }
  }
}

TEST(Options, TableNamesAreUniqueAndDescribed) {
  std::set<std::string> names;
  for (const OptionSpec& spec : OptionTable()) {
    std::string name = spec.name;
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
    EXPECT_EQ(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz-"), std::string::npos) << name;
    EXPECT_NE(spec.value_name, nullptr);
    ASSERT_NE(spec.help, nullptr);
    EXPECT_FALSE(std::string(spec.help).empty()) << name;
    EXPECT_NE(spec.apply, nullptr);
  }
  for (const char* expected :
       {"cluster-detection-method", "coordinator-address", "coordinator-port", "num-processes", "process-id",
        "num-nodes", "node-rank", "local-device-ids", "nproc-per-node", "launch-mode", "gpus-per-worker",
        "device-binding", "export", "run-id", "max-restarts", "format", "log-level"}) {
    EXPECT_TRUE(names.count(expected)) << expected;
  }
}

TEST(Options, DefaultValuesAreValid) {
  // Each default must parse as if a user had typed it.
  for (const OptionSpec& spec : OptionTable()) {
    if (spec.default_value == nullptr) continue;
    Options o;
    EXPECT_NO_THROW(spec.apply(o, "--x", spec.default_value)) << spec.name;
  }
}

TEST(Options, EnvAndConfigNames) {
  EXPECT_EQ(EnvNameFor("nproc-per-node"), "DISTRUN_NPROC_PER_NODE");
  EXPECT_EQ(EnvNameFor("export"), "DISTRUN_EXPORT");
  EXPECT_EQ(EnvNameFor("cluster-detection-method"), "DISTRUN_CLUSTER_DETECTION_METHOD");
  EXPECT_EQ(ConfigKeyFor("nproc-per-node"), "nproc_per_node");
  EXPECT_EQ(ConfigKeyFor("export"), "export");
  EXPECT_STREQ(OptionSourceName(OptionSource::kDefault), "default");
  EXPECT_STREQ(OptionSourceName(OptionSource::kConfig), "config");
  EXPECT_STREQ(OptionSourceName(OptionSource::kEnvironment), "environment");
  EXPECT_STREQ(OptionSourceName(OptionSource::kFlag), "flag");
}

TEST(Options, PrecedenceFlagOverEnvironmentOverConfigOverDefault) {
  RawValues config = {{"nproc-per-node", RawValue{"2", "distrun.yaml:1:17: nproc_per_node"}}};
  EnvVars env = {{"DISTRUN_NPROC_PER_NODE", "3"}};
  RawValues flags = Flag("nproc-per-node", "4");

  Options o = Resolve({}, {}, config);
  EXPECT_EQ(o.nproc_per_node, "2");
  EXPECT_EQ(o.effective["nproc-per-node"].source, OptionSource::kConfig);

  o = Resolve({}, env, config);
  EXPECT_EQ(o.nproc_per_node, "3");
  EXPECT_EQ(o.effective["nproc-per-node"].value, "3");
  EXPECT_EQ(o.effective["nproc-per-node"].source, OptionSource::kEnvironment);

  o = Resolve(flags, env, config);
  EXPECT_EQ(o.nproc_per_node, "4");
  EXPECT_EQ(o.effective["nproc-per-node"].value, "4");
  EXPECT_EQ(o.effective["nproc-per-node"].source, OptionSource::kFlag);

  o = Resolve({});
  EXPECT_EQ(o.effective["nproc-per-node"].source, OptionSource::kDefault);
}

TEST(Options, PrecedenceIsPerOption) {
  RawValues config = {{"gpus-per-worker", RawValue{"2", "f:1:1: gpus_per_worker"}},
                      {"max-restarts", RawValue{"5", "f:2:1: max_restarts"}}};
  EnvVars env = {{"DISTRUN_MAX_RESTARTS", "7"}};
  Options o = Resolve(Flag("format", "json"), env, config);
  EXPECT_EQ(o.gpus_per_worker, 2);
  EXPECT_EQ(o.effective["gpus-per-worker"].source, OptionSource::kConfig);
  EXPECT_EQ(o.max_restarts, 7);
  EXPECT_EQ(o.effective["max-restarts"].source, OptionSource::kEnvironment);
  EXPECT_EQ(o.format, DetectFormat::kJson);
  EXPECT_EQ(o.effective["format"].source, OptionSource::kFlag);
  EXPECT_EQ(o.effective["log-level"].source, OptionSource::kDefault);
}

TEST(Options, UnrelatedVariablesAreIgnored) {
  Options o = Resolve({}, {{"NPROC_PER_NODE", "9"}, {"DISTRUN_NPROC", "9"}, {"distrun_nproc_per_node", "9"}});
  EXPECT_EQ(o.nproc_per_node, "auto");
}

TEST(Options, ErrorsNameTheSourceAndValue) {
  std::string flag = ErrorOf([] { Resolve(Flag("nproc-per-node", "many")); });
  EXPECT_TRUE(Contains(flag, "--nproc-per-node='many'")) << flag;
  EXPECT_TRUE(Contains(flag, "gpu")) << flag;

  std::string env = ErrorOf([] { Resolve({}, {{"DISTRUN_NPROC_PER_NODE", "many"}}); });
  EXPECT_TRUE(Contains(env, "DISTRUN_NPROC_PER_NODE='many'")) << env;

  std::string config = ErrorOf([] {
    Resolve({}, {}, {{"nproc-per-node", RawValue{"many", "distrun.yaml:3:17: nproc_per_node"}}});
  });
  EXPECT_TRUE(Contains(config, "distrun.yaml:3:17: nproc_per_node='many'")) << config;

  std::string count = ErrorOf([] { Resolve({}, {{"DISTRUN_PROCESS_ID", "x"}}); });
  EXPECT_TRUE(Contains(count, "DISTRUN_PROCESS_ID='x'")) << count;
  for (const std::string& message : {flag, env, config, count}) {
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(Options, ClusterDetectionMethod) {
  for (const std::string& name : DetectionMethodNames()) {
    EXPECT_EQ(Resolve(Flag("cluster-detection-method", name)).topology.method, name);
  }
  std::string message = ErrorOf([] { Resolve(Flag("cluster-detection-method", "pbs")); });
  EXPECT_TRUE(Contains(message, "--cluster-detection-method='pbs'")) << message;
  EXPECT_TRUE(Contains(message, "slurm")) << message;
  EXPECT_TRUE(Contains(message, "deactivate")) << message;
  EXPECT_THROW(Resolve(Flag("cluster-detection-method", "SLURM")), UsageError);
  EXPECT_THROW(Resolve(Flag("cluster-detection-method", "")), UsageError);
}

TEST(Options, CoordinatorAddressAndPort) {
  Options o = Resolve(Flag("coordinator-address", "head:7000"));
  EXPECT_EQ(o.topology.coordinator_address, "head:7000");
  EXPECT_EQ(Resolve(Flag("coordinator-address", "head")).topology.coordinator_address, "head");
  EXPECT_EQ(Resolve(Flag("coordinator-address", "[fd00::1]:9")).topology.coordinator_address, "[fd00::1]:9");
  for (const char* bad : {"", ":80", "head:0", "head:70000", "fd00::1", "a b"}) {
    EXPECT_THROW(Resolve(Flag("coordinator-address", bad)), UsageError) << bad;
  }
  EXPECT_EQ(Resolve(Flag("coordinator-port", "61000")).topology.coordinator_port, 61000);
  for (const char* bad : {"0", "65536", "x", "-1", ""}) {
    EXPECT_THROW(Resolve(Flag("coordinator-port", bad)), UsageError) << bad;
  }
}

TEST(Options, CountsAndIds) {
  Options o = Resolve({}, {{"DISTRUN_NUM_PROCESSES", "8"},
                           {"DISTRUN_PROCESS_ID", "0"},
                           {"DISTRUN_NUM_NODES", "2"},
                           {"DISTRUN_NODE_RANK", "0"}});
  EXPECT_EQ(o.topology.num_processes, 8);
  EXPECT_EQ(o.topology.process_id, 0);
  EXPECT_EQ(o.topology.num_nodes, 2);
  EXPECT_EQ(o.topology.node_rank, 0);
  EXPECT_EQ(o.effective["num-processes"].source, OptionSource::kEnvironment);
  // Counts are at least 1; ids may be 0; nothing negative or non-decimal.
  EXPECT_THROW(Resolve(Flag("num-processes", "0")), UsageError);
  EXPECT_THROW(Resolve(Flag("num-nodes", "0")), UsageError);
  for (const char* name : {"num-processes", "process-id", "num-nodes", "node-rank", "max-restarts"}) {
    for (const char* bad : {"-1", "x", "", "1.5", " 1"}) {
      EXPECT_THROW(Resolve(Flag(name, bad)), UsageError) << name << "=" << bad;
    }
  }
  EXPECT_EQ(Resolve(Flag("max-restarts", "3")).max_restarts, 3);
}

TEST(Options, LocalDeviceIdsAreTokens) {
  Options o = Resolve(Flag("local-device-ids", "0,1"));
  ASSERT_TRUE(o.topology.local_device_ids);
  EXPECT_EQ(*o.topology.local_device_ids, (std::vector<std::string>{"0", "1"}));
  o = Resolve(Flag("local-device-ids", "GPU-8c3d,MIG-ab12"));
  EXPECT_EQ(*o.topology.local_device_ids, (std::vector<std::string>{"GPU-8c3d", "MIG-ab12"}));
  for (const char* bad : {"", "0,,1", "-1", "0,0", "gpu0"}) {
    EXPECT_THROW(Resolve(Flag("local-device-ids", bad)), UsageError) << bad;
  }
}

TEST(Options, NprocPerNode) {
  for (const char* good : {"auto", "gpu", "cpu", "1", "16"}) {
    EXPECT_EQ(Resolve(Flag("nproc-per-node", good)).nproc_per_node, good);
  }
  for (const char* bad : {"0", "-1", "GPU", "two", ""}) {
    EXPECT_THROW(Resolve(Flag("nproc-per-node", bad)), UsageError) << bad;
  }
}

TEST(Options, LaunchMode) {
  EXPECT_FALSE(Resolve(Flag("launch-mode", "auto")).launch_mode);
  EXPECT_EQ(Resolve(Flag("launch-mode", "per-task")).launch_mode, LaunchMode::kPerTask);
  EXPECT_EQ(Resolve(Flag("launch-mode", "per-node")).launch_mode, LaunchMode::kPerNode);
  EXPECT_THROW(Resolve(Flag("launch-mode", "per_task")), UsageError);
}

TEST(Options, GpusPerWorkerAndDeviceBinding) {
  EXPECT_EQ(Resolve(Flag("gpus-per-worker", "2")).gpus_per_worker, 2);
  EXPECT_THROW(Resolve(Flag("gpus-per-worker", "0")), UsageError);
  EXPECT_TRUE(Resolve(Flag("device-binding", "auto")).device_binding);
  EXPECT_FALSE(Resolve(Flag("device-binding", "none")).device_binding);
  EXPECT_THROW(Resolve(Flag("device-binding", "off")), UsageError);
}

TEST(Options, ExportFamilies) {
  Options o = Resolve(Flag("export", "jax"));
  EXPECT_FALSE(o.export_torch);
  EXPECT_TRUE(o.export_jax);
  EXPECT_FALSE(o.export_keras);
  EXPECT_FALSE(o.export_distrun);

  o = Resolve(Flag("export", " torch , distrun "));
  EXPECT_TRUE(o.export_torch);
  EXPECT_FALSE(o.export_jax);
  EXPECT_FALSE(o.export_keras);
  EXPECT_TRUE(o.export_distrun);

  o = Resolve({}, {}, {{"export", RawValue{"keras,torch", "f:1:9: export"}}});
  EXPECT_TRUE(o.export_torch);
  EXPECT_TRUE(o.export_keras);
  EXPECT_FALSE(o.export_jax);
  EXPECT_EQ(o.effective["export"].value, "keras,torch");

  std::string message = ErrorOf([] { Resolve(Flag("export", "torch,tf")); });
  EXPECT_TRUE(Contains(message, "'tf'")) << message;
  EXPECT_THROW(Resolve(Flag("export", "")), UsageError);
  EXPECT_THROW(Resolve(Flag("export", "torch,,jax")), UsageError);
  EXPECT_THROW(Resolve(Flag("export", "TORCH")), UsageError);
}

TEST(Options, RunId) {
  EXPECT_EQ(Resolve(Flag("run-id", "job-1.a_b")).run_id, "job-1.a_b");
  for (const char* bad : {"", "a b", "a'b", "a\"b", "a$b", "a`b", "a\\b", "a\nb", "a\tb"}) {
    EXPECT_THROW(Resolve(Flag("run-id", bad)), UsageError) << bad;
  }
}

TEST(Options, FormatAndLogLevel) {
  EXPECT_EQ(Resolve(Flag("format", "text")).format, DetectFormat::kText);
  EXPECT_EQ(Resolve(Flag("format", "json")).format, DetectFormat::kJson);
  EXPECT_EQ(Resolve(Flag("format", "yaml")).format, DetectFormat::kYaml);
  EXPECT_EQ(Resolve(Flag("format", "env")).format, DetectFormat::kEnv);
  std::string message = ErrorOf([] { Resolve(Flag("format", "xml")); });
  EXPECT_TRUE(Contains(message, "--format='xml'")) << message;
  for (const char* level : {"trace", "debug", "info", "warn", "error", "off"}) {
    EXPECT_EQ(Resolve(Flag("log-level", level)).log_level, level);
  }
  EXPECT_THROW(Resolve(Flag("log-level", "warning")), UsageError);
}

TEST(Options, JaxCoordinatorAddressNamesJaxServiceAndDefaultsRuntimeHost) {
  Options o = Resolve({}, {{"JAX_COORDINATOR_ADDRESS", "node7:1234"}});
  EXPECT_EQ(o.jax_coordinator_host, "node7");
  EXPECT_EQ(o.jax_coordinator_port, 1234);
  // distrun's runtime goes to the same host, but not to JAX's port.
  EXPECT_EQ(o.topology.coordinator_address, "node7");
  EXPECT_FALSE(o.topology.coordinator_port);
}

TEST(Options, JaxCoordinatorAddressWithoutPort) {
  Options o = Resolve({}, {{"JAX_COORDINATOR_ADDRESS", "node7"}});
  EXPECT_EQ(o.jax_coordinator_host, "node7");
  EXPECT_FALSE(o.jax_coordinator_port);
  EXPECT_EQ(o.topology.coordinator_address, "node7");
}

TEST(Options, JaxCoordinatorAddressIpv6IsBracketedForTheRuntime) {
  Options o = Resolve({}, {{"JAX_COORDINATOR_ADDRESS", "[fd00::7]:1234"}});
  EXPECT_EQ(o.jax_coordinator_host, "fd00::7");
  EXPECT_EQ(o.jax_coordinator_port, 1234);
  ASSERT_TRUE(o.topology.coordinator_address);
  EXPECT_EQ(*o.topology.coordinator_address, "[fd00::7]");
}

TEST(Options, ExplicitCoordinatorAddressWinsOverJaxForTheRuntime) {
  Options o = Resolve(Flag("coordinator-address", "head:7000"), {{"JAX_COORDINATOR_ADDRESS", "node7:1234"}});
  EXPECT_EQ(o.topology.coordinator_address, "head:7000");
  EXPECT_EQ(o.jax_coordinator_host, "node7");
  EXPECT_EQ(o.jax_coordinator_port, 1234);

  o = Resolve({}, {{"DISTRUN_COORDINATOR_ADDRESS", "head"}, {"JAX_COORDINATOR_ADDRESS", "node7"}});
  EXPECT_EQ(o.topology.coordinator_address, "head");
}

TEST(Options, JaxCoordinatorPort) {
  Options o = Resolve({}, {{"JAX_COORDINATOR_PORT", "4321"}});
  EXPECT_EQ(o.jax_coordinator_port, 4321);
  EXPECT_FALSE(o.jax_coordinator_host);
  EXPECT_FALSE(o.topology.coordinator_address);

  o = Resolve({}, {{"JAX_COORDINATOR_ADDRESS", "node7"}, {"JAX_COORDINATOR_PORT", "4321"}});
  EXPECT_EQ(o.jax_coordinator_host, "node7");
  EXPECT_EQ(o.jax_coordinator_port, 4321);
}

TEST(Options, EmptyJaxVariablesAreIgnored) {
  Options o = Resolve({}, {{"JAX_COORDINATOR_ADDRESS", ""}, {"JAX_COORDINATOR_PORT", ""}});
  EXPECT_FALSE(o.jax_coordinator_host);
  EXPECT_FALSE(o.jax_coordinator_port);
  EXPECT_FALSE(o.topology.coordinator_address);
}

TEST(Options, BadJaxVariablesNameTheVariable) {
  std::string address = ErrorOf([] { Resolve({}, {{"JAX_COORDINATOR_ADDRESS", "node7:http"}}); });
  EXPECT_TRUE(Contains(address, "JAX_COORDINATOR_ADDRESS")) << address;
  std::string port = ErrorOf([] { Resolve({}, {{"JAX_COORDINATOR_PORT", "0"}}); });
  EXPECT_TRUE(Contains(port, "JAX_COORDINATOR_PORT='0'")) << port;
}

}  // namespace
}  // namespace distrun

namespace distrun {
namespace {

TEST(ElasticOptions, RangeSpellingsAndPolicy) {
  Options o = ResolveOptions(Flag("nnodes", "2:4"), {}, {});
  ASSERT_TRUE(o.elastic);
  EXPECT_EQ(o.elastic->min_nodes, 2);
  EXPECT_EQ(o.elastic->max_nodes, 4);
  EXPECT_EQ(o.elastic->policy, ElasticPolicy::kResize);
  o = ResolveOptions(Flag("nnodes", "3..3"), {{"DISTRUN_ELASTIC_POLICY", "spares"}}, {});
  EXPECT_EQ(o.elastic->min_nodes, 3);
  EXPECT_EQ(o.elastic->max_nodes, 3);
  EXPECT_EQ(o.elastic->policy, ElasticPolicy::kSpares);
  o = ResolveOptions(Flag("nnodes", "5"), {}, {});  // N: a job of N nodes (torchrun's), no range
  EXPECT_FALSE(o.elastic);
  EXPECT_EQ(o.topology.num_nodes, 5);
  EXPECT_FALSE(ResolveOptions({}, {}, {}).elastic);
  EXPECT_THROW(ResolveOptions(Flag("elastic-policy", "shrink"), {}, {}), UsageError);
}

TEST(RecoveryOptions, InProcessHasATimeoutOfThreeHeartbeatsUnlessTold) {
  Options o = Resolve(Flag("recovery", "in-process"));
  EXPECT_EQ(o.recovery, RecoveryMode::kInProcess);
  EXPECT_EQ(o.RecoveryTimeoutSeconds(), 30);
  EXPECT_EQ(ResolveOptions(Flag("nnodes", "2:3"), {{"DISTRUN_RECOVERY", "in-process"}}, {})
                .RecoveryTimeoutSeconds(),
            3 * kElasticHeartbeatTimeoutS);
  EXPECT_EQ(Resolve(Flag("recovery-timeout", "2.5")).RecoveryTimeoutSeconds(), 2.5);
  EXPECT_EQ(Resolve({}).recovery, RecoveryMode::kRestart);
  EXPECT_EQ(ErrorOf([] { Resolve(Flag("recovery", "inprocess")); }),
            "--recovery='inprocess' is not valid; use restart or in-process");
  EXPECT_THROW(Resolve(Flag("recovery-timeout", "0")), UsageError);
}

TEST(RecoveryOptions, InProcessSparesNeedRoomForASpare) {
  RawValues flags = Flag("recovery", "in-process");
  flags.merge(Flag("nnodes", "2:2"));
  flags.merge(Flag("elastic-policy", "spares"));
  EXPECT_EQ(
      ErrorOf([&] { Resolve(flags); }),
      "--recovery in-process with --elastic-policy spares needs room for a spare: --nnodes 2:2 has none; "
      "give MAX above MIN (e.g. --nnodes 2:3)");
}

TEST(ElasticOptions, AnElasticJobNoticesSilenceSoonerUnlessTold) {
  EXPECT_EQ(ResolveOptions({}, {}, {}).heartbeat_timeout_s, 10);
  EXPECT_EQ(ResolveOptions(Flag("nnodes", "2:3"), {}, {}).heartbeat_timeout_s, kElasticHeartbeatTimeoutS);
  EXPECT_EQ(
      ResolveOptions(Flag("nnodes", "2:3"), {{"DISTRUN_HEARTBEAT_TIMEOUT", "20"}}, {}).heartbeat_timeout_s,
      20);
}

}  // namespace
}  // namespace distrun
