#pragma once
// For tests: a private munged (Debian's munge package) with its own key and socket in a temporary
// directory, stopped when the object goes. Tests that need it skip, saying why, where munged is missing.

#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "runtime/auth/munge_credentials.h"

extern char** environ;

namespace distrun::testing {

class MungeTestDaemon {
 public:
  MungeTestDaemon() {
    for (const char* path : {"/usr/sbin/munged", "/sbin/munged", "/usr/bin/munged"}) {
      if (::access(path, X_OK) == 0) binary_ = path;
    }
    if (binary_.empty()) {
      problem_ = "munged is not installed (Debian: munge)";
      return;
    }
    char pattern[] = "/tmp/distrun-munge-test-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      problem_ = "mkdtemp failed";
      return;
    }
    dir_ = pattern;
    ::chmod(dir_.c_str(), 0755);  // munged's socket directory must be searchable
    {
      std::ofstream key(dir_ + "/key", std::ios::binary);
      std::random_device rd;
      for (int i = 0; i < 1024; ++i) key.put(static_cast<char>(rd()));
    }
    ::chmod((dir_ + "/key").c_str(), 0600);
    socket_ = dir_ + "/socket";
    std::vector<std::string> args = {binary_,
                                     "--foreground",
                                     "--socket=" + socket_,
                                     "--key-file=" + dir_ + "/key",
                                     "--pid-file=" + dir_ + "/pid",
                                     "--log-file=" + dir_ + "/log",
                                     "--seed-file=" + dir_ + "/seed"};
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
      problem_ = "munged cannot be started";
      pid_ = -1;
      return;
    }
    for (int i = 0; i < 500 && !std::filesystem::exists(socket_); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!std::filesystem::exists(socket_)) problem_ = "munged did not create its socket";
  }
  ~MungeTestDaemon() {
    Stop();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  MungeTestDaemon(const MungeTestDaemon&) = delete;
  MungeTestDaemon& operator=(const MungeTestDaemon&) = delete;

  // Empty when munged runs.
  const std::string& problem() const { return problem_; }
  // libmunge for this munged; null with `why` (munged or libmunge missing: the caller skips).
  std::shared_ptr<MungeCredentials> Credentials(std::string* why) const {
    if (!problem_.empty()) {
      *why = problem_;
      return nullptr;
    }
    return MungeCredentials::Load(socket_, why);
  }
  const std::string& socket() const { return socket_; }

  void Stop() {
    if (pid_ <= 0) return;
    // munged may miss a SIGTERM that arrives while it starts its threads (seen: its main thread stayed in
    // accept); it is sent again every 100 ms, and after 5 s the daemon is killed.
    int status = 0;
    for (int tick = 0; ::waitpid(pid_, &status, WNOHANG) == 0; ++tick) {
      if (tick % 10 == 0) ::kill(pid_, tick < 50 ? SIGTERM : SIGKILL);
      ::usleep(10'000);
    }
    pid_ = -1;
  }

 private:
  std::string binary_;
  std::string dir_;
  std::string socket_;
  std::string problem_;
  pid_t pid_ = -1;
};

}  // namespace distrun::testing
