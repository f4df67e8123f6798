#include "launcher/config/command_line.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "detect/errors.h"
#include "launcher/config/options.h"
#include "test_support.h"

namespace distrun {
namespace {

using Args = std::vector<std::string>;

CommandLine Parse(const Args& args) { return testing::ParseArgs(args); }
std::string ParseError(const Args& args) { return testing::ParseArgsError(args); }

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(CommandLine, NoArgumentsIsALaunchWithoutCommand) {
  CommandLine cl = Parse({});
  EXPECT_EQ(cl.action, Action::kLaunch);
  EXPECT_TRUE(cl.flags.empty());
  EXPECT_FALSE(cl.config_path);
  EXPECT_TRUE(cl.command.empty());
}

TEST(CommandLine, EverythingAfterDashesIsTheCommandUntouched) {
  CommandLine cl = Parse(
      {"--nproc-per-node", "2", "--", "python", "train.py", "--lr", "3e-4", "--detect", "--", "-x", ""});
  EXPECT_EQ(cl.action, Action::kLaunch);
  EXPECT_EQ(cl.command, (Args{"python", "train.py", "--lr", "3e-4", "--detect", "--", "-x", ""}));
  ASSERT_EQ(cl.flags.count("nproc-per-node"), 1u);
  EXPECT_EQ(cl.flags["nproc-per-node"].value, "2");
  EXPECT_EQ(cl.flags["nproc-per-node"].where, "--nproc-per-node");
}

TEST(CommandLine, DashesWithNothingAfterThemGiveNoCommand) { EXPECT_TRUE(Parse({"--"}).command.empty()); }

TEST(CommandLine, FirstNonOptionWordStartsAPrefixCommand) {
  CommandLine cl =
      Parse({"--nproc-per-node=2", "python", "-u", "train.py", "--help", "--nproc-per-node", "9"});
  EXPECT_EQ(cl.action, Action::kLaunch);
  EXPECT_EQ(cl.command, (Args{"python", "-u", "train.py", "--help", "--nproc-per-node", "9"}));
  EXPECT_EQ(cl.flags["nproc-per-node"].value, "2");
}

TEST(CommandLine, EveryTableOptionIsAFlag) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string flag = std::string("--") + spec.name;
    CommandLine cl = Parse({flag, "v1"});
    ASSERT_EQ(cl.flags.count(spec.name), 1u) << flag;
    EXPECT_EQ(cl.flags[spec.name].value, "v1");
    EXPECT_EQ(cl.flags[spec.name].where, flag);
    cl = Parse({flag + "=v2"});
    EXPECT_EQ(cl.flags[spec.name].value, "v2") << flag;
  }
}

TEST(CommandLine, OnlyGivenFlagsAreReported) {
  CommandLine cl = Parse({"--format", "json", "--detect"});
  EXPECT_EQ(cl.flags.size(), 1u);
  EXPECT_EQ(cl.flags["format"].value, "json");
}

TEST(CommandLine, ValuesAreNotValidatedHere) {
  // Validation belongs to the option table, so the message names the source consistently.
  CommandLine cl = Parse({"--nproc-per-node", "many"});
  EXPECT_EQ(cl.flags["nproc-per-node"].value, "many");
}

TEST(CommandLine, RepeatedFlagTakesTheLast) {
  CommandLine cl = Parse({"--nproc-per-node", "2", "--nproc-per-node=4"});
  EXPECT_EQ(cl.flags["nproc-per-node"].value, "4");
}

TEST(CommandLine, EmptyFlagValueIsAnError) {
  std::string message = ParseError({"--run-id="});
  EXPECT_TRUE(Contains(message, "--run-id")) << message;
}

TEST(CommandLine, Config) {
  EXPECT_EQ(Parse({"--config", "my.yaml"}).config_path, "my.yaml");
  EXPECT_EQ(Parse({"--config=/etc/d.yaml", "--detect"}).config_path, "/etc/d.yaml");
  EXPECT_FALSE(Parse({"--detect"}).config_path);
}

TEST(CommandLine, Actions) {
  EXPECT_EQ(Parse({"--detect"}).action, Action::kDetect);
  EXPECT_EQ(Parse({"--detect", "--format", "json"}).action, Action::kDetect);
  EXPECT_EQ(Parse({"--dry-run", "--", "python"}).action, Action::kDryRun);
  EXPECT_EQ(Parse({"--dry-run", "--", "python"}).command, (Args{"python"}));
  EXPECT_EQ(Parse({"--dry-run", "python", "x.py"}).command, (Args{"python", "x.py"}));
  EXPECT_EQ(Parse({"--dry-run"}).action, Action::kDryRun);
  EXPECT_EQ(Parse({"--version"}).action, Action::kVersion);
}

TEST(CommandLine, Help) {
  for (const Args& args : {Args{"--help"}, Args{"-h"}, Args{"--detect", "--help"}, Args{"--help", "--bogus"},
                           Args{"--help", "--", "python"}}) {
    CommandLine cl = Parse(args);
    EXPECT_EQ(cl.action, Action::kHelp) << args.front();
    EXPECT_FALSE(cl.help_text.empty());
    EXPECT_TRUE(Contains(cl.help_text, "--nproc-per-node"));
  }
}

TEST(CommandLine, ActionsExcludeEachOther) {
  for (const Args& args :
       {Args{"--detect", "--dry-run"}, Args{"--detect", "--version"}, Args{"--dry-run", "--version"}}) {
    std::string message = ParseError(args);
    EXPECT_TRUE(Contains(message, "exclude each other")) << message;
  }
}

TEST(CommandLine, DetectTakesNoCommand) {
  std::string message = ParseError({"--detect", "--", "python", "train.py"});
  EXPECT_TRUE(Contains(message, "'python'")) << message;
  EXPECT_TRUE(Contains(message, "--dry-run")) << message;
  message = ParseError({"--detect", "python"});
  EXPECT_TRUE(Contains(message, "'python'")) << message;
}

TEST(CommandLine, UnknownOptionIsAnError) {
  for (const Args& args : {Args{"--bogus"}, Args{"--bogus=3"}, Args{"--detect", "--bogus"},
                           Args{"--bogus", "python"}, Args{"-z"}, Args{"--nproc-per-nod", "2"}}) {
    std::string message = ParseError(args);
    std::string opt = args[0] == "--detect" ? args[1] : args[0];
    opt = opt.substr(0, opt.find('='));
    EXPECT_TRUE(Contains(message, opt)) << opt << ": " << message;
    EXPECT_TRUE(Contains(message, "distrun --help")) << message;
  }
}

TEST(CommandLine, MissingValueIsAnError) {
  std::string message = ParseError({"--detect", "--nproc-per-node"});
  EXPECT_TRUE(Contains(message, "--nproc-per-node")) << message;
  EXPECT_TRUE(Contains(message, "distrun --help")) << message;
}

TEST(CommandLine, FlagValueIsNotTakenFromAfterTheDashes) {
  // "--" ends distrun's own arguments, so a flag before it has no value.
  EXPECT_THROW(Parse({"--nproc-per-node", "--", "4"}), UsageError);
}

TEST(CommandLine, DashesAfterTheCommandStartsBelongToTheCommand) {
  CommandLine cl = Parse({"python", "--", "train.py"});
  EXPECT_EQ(cl.command, (Args{"python", "--", "train.py"}));
}

TEST(CommandLine, ErrorMessagesAreOneLine) {
  for (const Args& args :
       {Args{"--bogus"}, Args{"--nproc-per-node"}, Args{"--detect", "--version"}, Args{"--detect", "--", "x"},
        Args{"--format", "--", "y"}, Args{"--config"}, Args{"--detect", "extra", "words"}}) {
    std::string message = ParseError(args);
    EXPECT_FALSE(message.empty()) << args.front();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(CommandLine, HelpTextListsEveryOptionWithItsVariableAndKey) {
  std::string help = HelpText();
  for (const char* part : {"--detect", "--dry-run", "--version", "--help", "--config", "--format"}) {
    EXPECT_TRUE(Contains(help, part)) << part;
  }
  for (const OptionSpec& spec : OptionTable()) {
    EXPECT_TRUE(Contains(help, std::string("--") + spec.name)) << spec.name;
    EXPECT_TRUE(Contains(help, EnvNameFor(spec.name))) << spec.name;
    EXPECT_TRUE(Contains(help, "key " + ConfigKeyFor(spec.name))) << spec.name;
    if (spec.default_value) {
      EXPECT_TRUE(Contains(help, std::string("default ") + spec.default_value)) << spec.name;
    }
  }
  EXPECT_TRUE(Contains(help, "Exit codes"));
}

TEST(CommandLine, HelpHasOneUsageSectionNamingEveryVerb) {
  std::string help = HelpText();
  size_t first = help.find("Usage:");
  ASSERT_NE(first, std::string::npos) << help;
  EXPECT_EQ(help.find("Usage:", first + 1), std::string::npos) << help;
  for (const char* verb : {"distrun kv ", "distrun barrier ", "distrun check "}) {
    EXPECT_TRUE(Contains(help, verb)) << verb;
  }
}

TEST(CommandLine, HelpTextMatchesTheParsedHelp) { EXPECT_EQ(Parse({"--help"}).help_text, HelpText()); }

// A command given without "--" that has its own "--" (python's argparse, torchrun, `bash -c ... -- args`)
// is rejected today: the first "--" is taken as distrun's even though the command had already started.
// See the report; enable once the lead decides.
TEST(CommandLine, PrefixCommandMayContainDashes) {
  CommandLine cl = Parse({"python", "train.py", "--", "--lr", "3"});
  EXPECT_EQ(cl.command, (Args{"python", "train.py", "--", "--lr", "3"}));
}

}  // namespace
}  // namespace distrun
