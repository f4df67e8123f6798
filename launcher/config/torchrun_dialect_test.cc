// torchrun's command line as distrun reads it (command_line.h, torchrun_dialect.h): every option in both
// spellings, what each means in distrun's options, and the refusals.
#include "launcher/config/torchrun_dialect.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "detect/errors.h"
#include "launcher/config/command_line.h"
#include "test_support.h"

namespace distrun {
namespace {

using Args = std::vector<std::string>;
using Flags = std::map<std::string, std::string>;

CommandLine Parse(const Args& args) { return testing::ParseArgs(args); }
std::string ErrorOf(const Args& args) { return testing::ParseArgsError(args); }

Flags Values(const CommandLine& cl) {
  Flags out;
  for (const auto& [name, raw] : cl.flags) out[name] = raw.value;
  return out;
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string Underscored(std::string arg) {
  size_t eq = arg.find('=');
  std::replace(arg.begin(), eq == std::string::npos ? arg.end() : arg.begin() + static_cast<long>(eq), '-',
               '_');
  arg.replace(0, 2, "--");
  return arg;
}

struct Case {
  Args args;  // before the script
  Flags flags;
  std::optional<ScriptForm> form;
};

// torchrun's documented options (TORCHRUN_FACTS.md), one row each, and what distrun makes of them.
const std::vector<Case> kCases = {
    {{"--nproc-per-node=8"}, {{"nproc-per-node", "8"}}, {}},
    {{"--nproc-per-node", "gpu"}, {{"nproc-per-node", "gpu"}}, {}},
    {{"--nnodes=2"}, {{"nnodes", "2"}}, {}},
    {{"--nnodes=1:4"}, {{"nnodes", "1:4"}}, {}},
    {{"--node-rank=1"}, {{"node-rank", "1"}}, {}},
    {{"--master-addr=10.0.0.1", "--master-port=29501"}, {{"coordinator-address", "10.0.0.1:29501"}}, {}},
    {{"--master-addr", "head"}, {{"coordinator-address", "head:29500"}}, {}},
    {{"--master-port", "1234"}, {{"coordinator-address", "127.0.0.1:1234"}}, {}},
    {{"--rdzv-backend=c10d", "--rdzv-endpoint=head:29400"}, {{"coordinator-address", "head:29400"}}, {}},
    {{"--rdzv-backend=c10d", "--rdzv-endpoint=head"}, {{"coordinator-address", "head:29400"}}, {}},
    {{"--rdzv-backend=static", "--rdzv-endpoint=head"}, {{"coordinator-address", "head:29500"}}, {}},
    {{"--rdzv-endpoint=[fe80::1]:7"}, {{"coordinator-address", "[fe80::1]:7"}}, {}},
    {{"--rdzv-id=job-7"}, {{"run-id", "job-7"}}, {}},
    {{"--rdzv-id=none"}, {{"run-id", "none"}}, {}},
    {{"--rdzv-conf=join_timeout=900,last_call_timeout=30,is_host=1"},
     {{"initialization-timeout", "900"}},
     {}},
    {{"--standalone"}, {{"cluster-detection-method", "local"}}, {}},
    {{"--max-restarts=3"}, {{"max-restarts", "3"}}, {}},
    {{"-m"}, {}, ScriptForm::kModule},
    {{"--module"}, {}, ScriptForm::kModule},
    {{"--no-python"}, {}, ScriptForm::kProgram},
    {{"--run-path"}, {}, {}},
    {{"--log-dir=logs"}, {{"log-dir", "logs"}}, {}},
    {{"-r", "3"}, {{"redirects", "3"}}, {}},
    {{"-r3"}, {{"redirects", "3"}}, {}},
    {{"--redirects=0:1,1:2"}, {{"redirects", "0:1,1:2"}}, {}},
    {{"-t", "1"}, {{"tee", "1"}}, {}},
    {{"--tee=3"}, {{"tee", "3"}}, {}},
    {{"--local-ranks-filter=0,2"}, {{"local-ranks-filter", "0,2"}}, {}},
    {{"--role=trainer"}, {{"role", "trainer"}}, {}},
    {{"--local-addr=10.0.0.2"}, {}, {}},
    {{"--monitor-interval=5"}, {}, {}},
    {{"--start-method=fork"}, {}, {}},
    {{"--event-log-handler=null"}, {}, {}},
    {{"--logs-specs=x"}, {}, {}},
    {{"--shutdown-timeout=60"}, {{"grace-period", "60"}}, {}},
};

TEST(TorchrunDialect, EveryOptionInBothSpellingsMeansItsDistrunOptions) {
  for (const Case& c : kCases) {
    for (bool underscores : {false, true}) {
      Args args;
      for (const std::string& a : c.args) {
        args.push_back(underscores && a.starts_with("--") ? Underscored(a) : a);
      }
      std::string shown;
      for (const auto& a : args) shown += a + " ";
      args.insert(args.end(), {"train.py", "--lr", "0.1", "--nproc_per_node", "9"});
      CommandLine cl = Parse(args);
      EXPECT_EQ(Values(cl), c.flags) << shown;
      EXPECT_EQ(cl.form, c.form) << shown;
      EXPECT_EQ(cl.command, (Args{"train.py", "--lr", "0.1", "--nproc_per_node", "9"})) << shown;
      EXPECT_FALSE(cl.command_after_dashes) << shown;
    }
  }
}

TEST(TorchrunDialect, EveryDistrunOptionHasTheUnderscoreSpellingToo) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string dashed = std::string("--") + spec.name;
    std::string underscored = Underscored(dashed);
    for (const Args& args : {Args{underscored + "=v"}, Args{underscored, "v"}}) {
      CommandLine cl = Parse(args);
      ASSERT_EQ(cl.flags.count(spec.name), 1u) << underscored;
      EXPECT_EQ(cl.flags[spec.name].value, "v") << underscored;
    }
  }
  EXPECT_EQ(Parse({"--dry_run"}).action, Action::kDryRun);
}

TEST(TorchrunDialect, DashesStillRunTheCommandAsGiven) {
  CommandLine cl = Parse({"--nproc_per_node=2", "--", "train.py", "-m"});
  EXPECT_TRUE(cl.command_after_dashes);
  EXPECT_EQ(cl.command, (Args{"train.py", "-m"}));
  EXPECT_FALSE(cl.form);
}

TEST(TorchrunDialect, ARendezvousDistrunCannotServeIsOneErrorNamingWhatToUse) {
  for (const char* backend : {"etcd", "etcd-v2"}) {
    std::string message = ErrorOf({std::string("--rdzv_backend=") + backend, "train.py"});
    EXPECT_TRUE(Contains(message, "--rdzv_backend=" + std::string(backend))) << message;
    EXPECT_TRUE(Contains(message, "--rdzv-backend c10d --rdzv-endpoint HOST:PORT")) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_TRUE(Contains(ErrorOf({"--rdzv_backend=zookeeper", "x.py"}), "use c10d or static"));
}

TEST(TorchrunDialect, ContradictionsAreErrors) {
  EXPECT_TRUE(Contains(ErrorOf({"-m", "--no_python", "x"}), "exclude each other"));
  EXPECT_TRUE(Contains(ErrorOf({"--standalone", "--master_addr=h", "x.py"}), "this host alone"));
  EXPECT_TRUE(Contains(ErrorOf({"--rdzv_endpoint=a:1", "--master_port=2", "x.py"}), "give one of them"));
  std::string disagree = ErrorOf({"--master_addr=a", "--coordinator-address=b:1", "x.py"});
  EXPECT_TRUE(Contains(disagree, "--master_addr and --coordinator-address disagree")) << disagree;
  // The same value both ways is no contradiction.
  EXPECT_EQ(
      Values(Parse({"--master_addr=a", "--coordinator-address=a:29500", "x.py"}))["coordinator-address"],
      "a:29500");
  EXPECT_TRUE(Contains(ErrorOf({"--standalone=1", "x.py"}), "takes no value"));
  EXPECT_TRUE(Contains(ErrorOf({"--master_port"}), "--master_port needs a value"));
  EXPECT_TRUE(Contains(ErrorOf({"--rdzv_conf=join_timeout", "x.py"}), "KEY=VALUE"));
}

TEST(TorchrunDialect, OptionsDistrunDoesDifferentlyNameItsOwn) {
  EXPECT_TRUE(Contains(ErrorOf({"--numa_binding=node", "x.py"}), "--cpu-bind numa"));
  EXPECT_TRUE(Contains(ErrorOf({"--virtual_local_rank", "x.py"}), "--device-binding none"));
  EXPECT_TRUE(Contains(ErrorOf({"--signals_to_handle=SIGUSR1", "x.py"}), "--forward-signals"));
  EXPECT_TRUE(Contains(ErrorOf({"--duplicate_stdout_filters=x", "x.py"}), "--log-dir"));
}

TEST(TorchrunDialect, AnUnknownOptionNearAKnownOneGetsDidYouMean) {
  EXPECT_TRUE(Contains(ErrorOf({"--nproc_per_nod=2", "x.py"}), "did you mean --nproc-per-node?"));
  EXPECT_TRUE(Contains(ErrorOf({"--master_adr=h", "x.py"}), "did you mean --master-addr?"));
  EXPECT_TRUE(Contains(ErrorOf({"--rdzv-endpont", "h", "x.py"}), "did you mean --rdzv-endpoint?"));
  std::string far = ErrorOf({"--bogus", "x.py"});
  EXPECT_TRUE(Contains(far, "unknown option '--bogus'")) << far;
  EXPECT_FALSE(Contains(far, "did you mean")) << far;
}

TEST(TorchrunDialect, PetVariablesAreTorchrunsOptions) {
  std::map<std::string, std::string, std::less<>> env = {
      {"PET_NPROC_PER_NODE", "4"}, {"PET_NNODES", "2"}, {"PET_NODE_RANK", "1"}, {"PET_MASTER_ADDR", "head"},
      {"PET_MASTER_PORT", "7"},    {"PET_MODULE", "0"}, {"PET_NO_PYTHON", "1"}, {"OTHER", "x"}};
  TorchrunMeaning m = TranslateTorchrun(TorchrunVariables(env));
  EXPECT_EQ(m.options["nproc-per-node"].value, "4");
  EXPECT_EQ(m.options["nproc-per-node"].where, "PET_NPROC_PER_NODE");
  EXPECT_EQ(m.options["nnodes"].value, "2");
  EXPECT_EQ(m.options["node-rank"].value, "1");
  EXPECT_EQ(m.options["coordinator-address"].value, "head:7");
  EXPECT_EQ(m.form, ScriptForm::kProgram);  // PET_MODULE=0 is not given
  EXPECT_EQ(TranslateTorchrun(TorchrunVariables({{"PET_STANDALONE", "true"}}))
                .options["cluster-detection-method"]
                .value,
            "local");
}

TEST(TorchrunDialect, FlagsWinOverPetVariablesAndDistrunsVariablesOverBoth) {
  Options o = ResolveOptions(
      Parse({"--nproc_per_node=3", "x.py"}).flags,
      {{"PET_NPROC_PER_NODE", "4"}, {"PET_MAX_RESTARTS", "5"}, {"PET_ROLE", "a"}, {"DISTRUN_ROLE", "b"}}, {});
  EXPECT_EQ(o.nproc_per_node, "3");
  EXPECT_EQ(o.max_restarts, 5);
  EXPECT_EQ(o.effective["max-restarts"].source, OptionSource::kEnvironment);
  EXPECT_EQ(o.role, "b");
}

TEST(TorchrunDialect, NnodesNIsANodeCountAndARangeIsElastic) {
  Options o = ResolveOptions(Parse({"--nnodes=2", "x.py"}).flags, {}, {});
  EXPECT_EQ(o.topology.num_nodes, 2);
  EXPECT_FALSE(o.elastic);
  o = ResolveOptions(Parse({"--nnodes=1:3", "x.py"}).flags, {}, {});
  ASSERT_TRUE(o.elastic);
  EXPECT_EQ(o.elastic->min_nodes, 1);
  EXPECT_EQ(o.elastic->max_nodes, 3);
  EXPECT_THROW(ResolveOptions(Parse({"--nnodes=2", "--num-nodes=3", "x.py"}).flags, {}, {}), UsageError);
}

}  // namespace
}  // namespace distrun
