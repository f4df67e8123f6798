#include "test_support.h"

#include <gtest/gtest.h>

#include <fstream>
#include <stdexcept>

#include "detect/errors.h"

namespace distrun::testing {

Environment MakeEnv(std::initializer_list<std::pair<std::string, std::string>> vars) {
  Environment env;
  for (const auto& [name, value] : vars) env.vars[name] = value;
  env.hostname = "testhost";
  return env;
}

std::string FixturePath(const std::string& relative_path) {
  return std::string(DISTRUN_FIXTURES_DIR) + "/" + relative_path;
}

std::vector<std::pair<std::string, std::string>> ReadFixtureLines(const std::string& relative_path) {
  std::ifstream in(FixturePath(relative_path));
  if (!in) throw std::runtime_error("cannot open fixture " + FixturePath(relative_path));
  std::vector<std::pair<std::string, std::string>> lines;
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    lines.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return lines;
}

Environment LoadFixtureEnv(const std::string& relative_path, const std::string& prefix) {
  Environment env;
  env.hostname = "testhost";
  for (auto [name, value] : ReadFixtureLines(relative_path)) {
    if (!prefix.empty()) {
      if (name.rfind(prefix, 0) != 0) continue;
      name = name.substr(prefix.size());
    }
    env.vars[name] = value;
  }
  return env;
}

std::string DetectorError(const Detector& detector, const Environment& env) {
  try {
    detector.detect(env);
  } catch (const UsageError& e) {
    std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    return message;
  }
  ADD_FAILURE() << "no UsageError from the " << detector.name << " detector";
  return "";
}

CommandLine ParseArgs(const std::vector<std::string>& args) {
  std::vector<const char*> argv = {"distrun"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return ParseCommandLine(static_cast<int>(argv.size()), argv.data());
}

std::string ParseArgsError(const std::vector<std::string>& args) {
  try {
    ParseArgs(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace distrun::testing
