#include "launcher/config/config_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "detect/errors.h"
#include "launcher/config/options.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

template <typename F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

std::string ParseError(const std::string& text) {
  return ErrorOf([&] { ParseConfigText(text, "distrun.yaml"); });
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A fresh directory under the test temp dir, removed at the end of the test.
class ConfigFileDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("distrun_config_test_" + std::to_string(::getpid()) + "_" +
                                             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    fs::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

TEST(ConfigFile, EmptyTextSetsNothing) {
  for (const char* text : {"", "\n", "# only a comment\n", "---\n"}) {
    ConfigFile c = ParseConfigText(text, "distrun.yaml");
    EXPECT_EQ(c.path, "distrun.yaml");
    EXPECT_TRUE(c.values.empty()) << text;
    EXPECT_TRUE(c.command.empty()) << text;
  }
}

TEST(ConfigFile, ScalarValueKeyedByOptionNameWithLocation) {
  ConfigFile c = ParseConfigText("# comment\nnproc_per_node: 4\n", "distrun.yaml");
  ASSERT_EQ(c.values.count("nproc-per-node"), 1u);
  EXPECT_EQ(c.values["nproc-per-node"].value, "4");
  EXPECT_EQ(c.values["nproc-per-node"].where, "distrun.yaml:2:17: nproc_per_node");
}

TEST(ConfigFile, EveryOptionHasAConfigKey) {
  for (const OptionSpec& spec : OptionTable()) {
    std::string key = ConfigKeyFor(spec.name);
    ConfigFile c = ParseConfigText(key + ": x\n", "f.yaml");
    EXPECT_EQ(c.values.count(spec.name), 1u) << key;
  }
}

TEST(ConfigFile, QuotedAndTypedScalarsKeepTheirText) {
  ConfigFile c = ParseConfigText(
      "run_id: \"job 7\"\n"
      "coordinator_address: 'head:7000'\n"
      "max_restarts: 003\n"
      "device_binding: none\n",
      "f.yaml");
  EXPECT_EQ(c.values["run-id"].value, "job 7");
  EXPECT_EQ(c.values["coordinator-address"].value, "head:7000");
  EXPECT_EQ(c.values["max-restarts"].value, "003");
  EXPECT_EQ(c.values["device-binding"].value, "none");
}

TEST(ConfigFile, SequencesAreJoinedWithCommas) {
  ConfigFile c = ParseConfigText(
      "export: [torch, jax]\n"
      "local_device_ids:\n"
      "  - GPU-aaaa\n"
      "  - GPU-bbbb\n",
      "f.yaml");
  EXPECT_EQ(c.values["export"].value, "torch,jax");
  EXPECT_EQ(c.values["export"].where, "f.yaml:1:9: export");
  EXPECT_EQ(c.values["local-device-ids"].value, "GPU-aaaa,GPU-bbbb");
  EXPECT_EQ(c.values["local-device-ids"].where, "f.yaml:3:3: local_device_ids");
}

TEST(ConfigFile, JoinedSequenceResolvesLikeAFlag) {
  ConfigFile c = ParseConfigText("export: [keras, distrun]\n", "f.yaml");
  Options o = ResolveOptions({}, {}, c.values);
  EXPECT_FALSE(o.export_torch);
  EXPECT_FALSE(o.export_jax);
  EXPECT_TRUE(o.export_keras);
  EXPECT_TRUE(o.export_distrun);
  EXPECT_EQ(o.effective["export"].source, OptionSource::kConfig);
}

TEST(ConfigFile, UnknownKeyNamesFileLineColumnAndSuggests) {
  std::string message = ParseError("nproc_per_node: 2\nnproc_per_nod: 4\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:2:1: ")) << message;
  EXPECT_TRUE(Contains(message, "unknown key 'nproc_per_nod'")) << message;
  EXPECT_TRUE(Contains(message, "did you mean 'nproc_per_node'")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ConfigFile, DashedKeySuggestsTheUnderscoreForm) {
  std::string message = ParseError("gpus-per-worker: 2\n");
  EXPECT_TRUE(Contains(message, "unknown key 'gpus-per-worker'")) << message;
  EXPECT_TRUE(Contains(message, "did you mean 'gpus_per_worker'")) << message;
}

TEST(ConfigFile, UnknownKeyFarFromAnyOptionHasNoSuggestion) {
  std::string message = ParseError("  \nqqqqqq: 1\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:2:1: unknown key 'qqqqqq'")) << message;
  EXPECT_FALSE(Contains(message, "did you mean")) << message;
}

TEST(ConfigFile, IndentedKeyColumnIsReported) {
  std::string message = ParseError("{nproc_per_node: 2,   bogus_key: 3}\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:1:23: unknown key 'bogus_key'")) << message;
}

TEST(ConfigFile, InvalidYamlNamesTheLocation) {
  std::string message = ParseError("nproc_per_node: 2\nexport: [torch\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:")) << message;
  EXPECT_TRUE(Contains(message, "invalid YAML")) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(ConfigFile, RootMustBeAMap) {
  for (const char* text : {"- a\n- b\n", "just text\n", "42\n"}) {
    std::string message = ParseError(text);
    EXPECT_TRUE(message.starts_with("distrun.yaml:1:1: ")) << message;
    EXPECT_TRUE(Contains(message, "map")) << message;
  }
}

TEST(ConfigFile, NullValueIsAnError) {
  for (const char* text : {"nproc_per_node:\n", "nproc_per_node: ~\n", "nproc_per_node: null\n"}) {
    std::string message = ParseError(text);
    EXPECT_TRUE(message.starts_with("distrun.yaml:1:")) << message;
    EXPECT_TRUE(Contains(message, "'nproc_per_node' has no value")) << message;
  }
}

TEST(ConfigFile, MapValueIsAnError) {
  std::string message = ParseError("nproc_per_node:\n  a: 1\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:2:3: ")) << message;
  EXPECT_TRUE(Contains(message, "'nproc_per_node' must be a value or a list of values")) << message;
}

TEST(ConfigFile, NestedItemInASequenceNamesOneLocation) {
  // The location is the item's own: "file:line:col: ...", not two positions run together.
  std::string message = ParseError("export:\n  - torch\n  - [jax]\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:3:5: 'export' must be")) << message;
}

TEST(ConfigFile, BadValueErrorNamesFileLineColumnThroughResolve) {
  ConfigFile c = ParseConfigText("log_level: info\nnproc_per_node: many\n", "/etc/distrun.yaml");
  std::string message = ErrorOf([&] { ResolveOptions({}, {}, c.values); });
  EXPECT_TRUE(message.starts_with("/etc/distrun.yaml:2:17: nproc_per_node='many'")) << message;
}

TEST(ConfigFile, CommandStringRunsThroughTheShell) {
  ConfigFile c = ParseConfigText("command: python train.py --lr 3e-4 | tee log\n", "f.yaml");
  EXPECT_EQ(c.command, (std::vector<std::string>{"/bin/sh", "-c", "python train.py --lr 3e-4 | tee log"}));
  EXPECT_TRUE(c.values.empty());
}

TEST(ConfigFile, CommandListIsKeptAsArgv) {
  ConfigFile c =
      ParseConfigText("command: [python, -u, \"train file.py\", 3]\nnproc_per_node: 2\n", "f.yaml");
  EXPECT_EQ(c.command, (std::vector<std::string>{"python", "-u", "train file.py", "3"}));
  EXPECT_EQ(c.values["nproc-per-node"].value, "2");

  c = ParseConfigText("command:\n  - ./train\n  - --epochs=3\n", "f.yaml");
  EXPECT_EQ(c.command, (std::vector<std::string>{"./train", "--epochs=3"}));
}

TEST(ConfigFile, BadCommandsAreErrors) {
  for (const char* text : {"command: []\n", "command:\n", "command: {a: b}\n"}) {
    std::string message = ParseError(text);
    EXPECT_TRUE(message.starts_with("distrun.yaml:1:1: ")) << text << " → " << message;
    EXPECT_TRUE(Contains(message, "'command' must be a string or a non-empty list")) << message;
  }
  std::string message = ParseError("command:\n  - python\n  - {a: b}\n");
  EXPECT_TRUE(message.starts_with("distrun.yaml:3:5: ")) << message;
  EXPECT_TRUE(Contains(message, "'command' items must be strings")) << message;
}

TEST_F(ConfigFileDir, LoadsTheExplicitPath) {
  std::string path = Write("my.yaml", "nproc_per_node: 3\n");
  ConfigFile c = LoadConfigFile(path, (dir_ / "distrun.yaml").string());
  EXPECT_EQ(c.path, path);
  EXPECT_EQ(c.values["nproc-per-node"].value, "3");
  EXPECT_EQ(c.values["nproc-per-node"].where, path + ":1:17: nproc_per_node");
}

TEST_F(ConfigFileDir, ExplicitPathWinsOverTheDefault) {
  std::string explicit_path = Write("my.yaml", "nproc_per_node: 3\n");
  std::string default_path = Write("distrun.yaml", "nproc_per_node: 5\n");
  EXPECT_EQ(LoadConfigFile(explicit_path, default_path).values["nproc-per-node"].value, "3");
  EXPECT_EQ(LoadConfigFile(std::nullopt, default_path).values["nproc-per-node"].value, "5");
  EXPECT_EQ(LoadConfigFile(std::nullopt, default_path).path, default_path);
}

TEST_F(ConfigFileDir, MissingDefaultIsNoConfig) {
  ConfigFile c = LoadConfigFile(std::nullopt, (dir_ / "distrun.yaml").string());
  EXPECT_TRUE(c.path.empty());
  EXPECT_TRUE(c.values.empty());
  EXPECT_TRUE(c.command.empty());
}

TEST_F(ConfigFileDir, DefaultThatIsADirectoryIsIgnored) {
  fs::create_directories(dir_ / "distrun.yaml");
  EXPECT_TRUE(LoadConfigFile(std::nullopt, (dir_ / "distrun.yaml").string()).path.empty());
}

TEST_F(ConfigFileDir, MissingExplicitPathIsAnError) {
  std::string missing = (dir_ / "nope.yaml").string();
  std::string message = ErrorOf([&] { LoadConfigFile(missing, "distrun.yaml"); });
  EXPECT_TRUE(Contains(message, missing)) << message;
  EXPECT_TRUE(Contains(message, "cannot be read")) << message;
}

TEST_F(ConfigFileDir, ExplicitPathThatIsADirectoryIsAnError) {
  // Reading a directory must not pass for an empty config.
  std::string message = ErrorOf([&] { LoadConfigFile(dir_.string(), "distrun.yaml"); });
  EXPECT_TRUE(Contains(message, dir_.string())) << message;
}

TEST_F(ConfigFileDir, ErrorsInAFileNameItsPath) {
  std::string path = Write("bad.yaml", "nproc_per_node: 1\nnprocs: 4\n");
  std::string message = ErrorOf([&] { LoadConfigFile(path, "distrun.yaml"); });
  EXPECT_TRUE(message.starts_with(path + ":2:1: unknown key 'nprocs'")) << message;
}

}  // namespace
}  // namespace distrun

namespace distrun {
namespace {

TEST(ConfigFile, SecondDocumentIsRefusedWithItsLine) {
  try {
    ParseConfigText("nproc_per_node: 2\n---\nnproc_per_node: 4\n", "d.yaml");
    FAIL() << "a second document must be an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("d.yaml:2:1: a second YAML document"), std::string::npos)
        << e.what();
  }
  // A leading marker, comments and directives do not make a second document.
  EXPECT_NO_THROW(ParseConfigText("%YAML 1.2\n# profile\n---\nnproc_per_node: 2\n", "d.yaml"));
  EXPECT_NO_THROW(ParseConfigText("tag_template: \"--- {rank} \"\n", "d.yaml"));
}

// Found by config_fuzz: yaml-cpp's LoadAll never returned on a lone comma.
TEST(ConfigFile, LoneCommaFinishes) {
  try {
    ParseConfigText(",", "fuzz.yaml");
  } catch (const UsageError&) {
  }
  try {
    ParseConfigText(",\n,", "fuzz.yaml");
  } catch (const UsageError&) {
  }
}

}  // namespace
}  // namespace distrun
