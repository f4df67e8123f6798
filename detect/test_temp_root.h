#pragma once
// A private file-system root for one test (Environment::root), removed when the test ends.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace distrun::testing {

class TempRoot {
 public:
  TempRoot() {
    std::random_device rd;
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("distrun-root-" + std::to_string(rd()) + "-" + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  TempRoot(const TempRoot&) = delete;
  TempRoot& operator=(const TempRoot&) = delete;
  ~TempRoot() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }

  const std::filesystem::path& path() const { return path_; }

  // Creates `relative` (e.g. "etc/hosts") under the root with `content`.
  void Write(const std::string& relative, const std::string& content) const {
    std::filesystem::path p = path_ / relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace distrun::testing
