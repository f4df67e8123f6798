#include "launcher/supervise/worker_watch.h"

#include <dirent.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>

#include "launcher/supervise/python_site.h"
#include "launcher/supervise/stack_collector.h"

namespace distrun {
namespace {

namespace fs = std::filesystem;

// A node's answer travels as one frame of the agent channel (4 MiB at most): every dump gets a share of
// this, cut at its end (faulthandler and gdb print the innermost frames first).
constexpr size_t kStacksReplyBytes = size_t{2} << 20;
constexpr size_t kStackBytes = size_t{256} << 10;

// CPU time only matters to the stall warning, whose times are minutes: a look every few seconds is plenty,
// and a look reads every process's stat file.
constexpr std::chrono::seconds kCpuReadInterval{5};

// utime + stime of every process, by process group: a worker is its own group's leader, and its children
// (a shell's python, a trainer's data loaders) are in the group.
std::map<pid_t, uint64_t> CpuTicksByGroup() {
  std::map<pid_t, uint64_t> ticks;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return ticks;
  while (dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    // The command name (field 2) may hold spaces and parentheses: fields count from the last ')'.
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(line.substr(close + 1));
    std::string f;
    pid_t group = 0;
    uint64_t user = 0, system = 0;
    // After ')': state(3) ppid(4) pgrp(5) session tty tpgid flags minflt cminflt majflt cmajflt utime(14)
    // stime(15)
    for (int field = 3; field <= 15 && (fields >> f); ++field) {
      if (field == 5) group = static_cast<pid_t>(std::strtol(f.c_str(), nullptr, 10));
      if (field == 14) user = std::strtoull(f.c_str(), nullptr, 10);
      if (field == 15) system = std::strtoull(f.c_str(), nullptr, 10);
    }
    ticks[group] += user + system;
  }
  ::closedir(proc);
  return ticks;
}

}  // namespace

WorkerWatch::WorkerWatch(size_t slots, const fs::path& temp_dir, std::string host,
                         std::chrono::milliseconds stacks_timeout, std::vector<std::string> tool_env)
    : host_(std::move(host)), tracker_(slots), workers_(slots) {
  stacks_ready_.Reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  std::string pattern = (temp_dir / "distrun-watch-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    problem_ = "cannot make a directory under " + temp_dir.string() + " (" + std::strerror(errno) +
               "), so progress reports, stacks and distrun's hooks of JAX and mpi4py are not available; set "
               "TMPDIR to a writable directory";
    return;
  }
  dir_ = pattern;
  try {
    board_ = ProgressBoard::Create((dir_ / "progress").string(), static_cast<int>(slots));
    python_site_ = std::make_unique<PythonSite>((dir_ / "python").string());
    StackCollectorConfig config;
    config.dir = (dir_ / "stacks").string();
    config.timeout = stacks_timeout;
    config.gdb_env = std::move(tool_env);
    fs::create_directory(config.dir);
    collector_ = std::make_unique<StackCollector>(config);
  } catch (const std::exception& e) {
    problem_ = std::string(e.what()) +
               "; progress reports, stacks and distrun's hooks of JAX and mpi4py are not available";
  }
}

WorkerWatch::~WorkerWatch() {
  if (collecting_.joinable()) collecting_.join();
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
}

void WorkerWatch::AddVariables(size_t slot, Variables& vars) const {
  if (board_) {
    vars[kProgressFileVariable] = (dir_ / "progress").string();
    vars[kProgressSlotVariable] = std::to_string(slot);
  }
  if (python_site_) {
    auto it = vars.find("PYTHONPATH");
    vars["PYTHONPATH"] = python_site_->PythonPath(it == vars.end() ? "" : it->second);
  }
  if (collector_) {
    for (auto& [name, value] : collector_->WorkerEnvironment()) vars[name] = value;
  }
}

void WorkerWatch::Started(size_t slot, int rank, pid_t pid, std::string gpu, Clock::time_point now) {
  if (slot >= workers_.size()) return;
  workers_[slot] = Worker{true, rank, pid, std::move(gpu)};
  tracker_.Started(slot, rank, pid, now);
}

void WorkerWatch::Starting(size_t slot) {
  if (board_ && slot < workers_.size()) board_->Clear(static_cast<int>(slot));
}

void WorkerWatch::Exited(size_t slot) {
  if (slot >= workers_.size()) return;
  workers_[slot].running = false;
  tracker_.Exited(slot);
}

void WorkerWatch::Output(size_t slot, Clock::time_point now) { tracker_.Output(slot, now); }

void WorkerWatch::ReadCpu(Clock::time_point now) {
  std::map<pid_t, uint64_t> ticks = CpuTicksByGroup();
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (!workers_[i].running) continue;
    auto it = ticks.find(workers_[i].pid);
    if (it != ticks.end()) tracker_.Cpu(i, it->second, now);
  }
}

NodeProgress WorkerWatch::Sample(int epoch, Clock::time_point now) {
  tracker_.Look(now);
  if (board_) {
    for (size_t i = 0; i < workers_.size(); ++i) {
      if (!workers_[i].running) continue;
      tracker_.Sample(i, board_->Read(static_cast<int>(i)), now);
      tracker_.Sections(i, board_->ReadSections(static_cast<int>(i)), now);
    }
  }
  // Not at the first sample: that comes as the workers start, where reading every process's stat file
  // cost a local launch of 8 /bin/true 1 ms (more on a node with thousands of processes), and a worker's
  // activity counts from its start anyway (ProgressTracker::Started).
  if (next_cpu_read_ == Clock::time_point{}) {
    next_cpu_read_ = now + kCpuReadInterval;
  } else if (now >= next_cpu_read_) {
    next_cpu_read_ = now + kCpuReadInterval;
    ReadCpu(now);
  }
  return tracker_.Progress(epoch, now);
}

std::vector<ProgressSample> WorkerWatch::Reports() const {
  std::vector<ProgressSample> out;
  if (!board_) return out;
  for (size_t i = 0; i < workers_.size(); ++i) out.push_back(board_->Read(static_cast<int>(i)));
  return out;
}

void WorkerWatch::CollectStacks(uint64_t id) {
  std::lock_guard lock(mu_);
  asked_.push_back(id);
  if (!collecting_done_) return;  // the running collection answers it too
  if (collecting_.joinable()) collecting_.join();
  collecting_done_ = false;
  std::vector<StackTarget> targets;
  std::vector<Worker> who;
  for (const Worker& w : workers_) {
    if (!w.running) continue;
    targets.push_back(StackTarget{w.rank, w.pid});
    who.push_back(w);
  }
  collecting_ = std::thread([this, targets = std::move(targets), who = std::move(who)] {
    std::vector<CollectedStack> stacks;
    if (collector_) stacks = collector_->Collect(targets);
    StacksReply reply;
    const size_t share = std::min(kStackBytes, kStacksReplyBytes / std::max<size_t>(1, who.size()));
    for (size_t i = 0; i < who.size(); ++i) {
      WorkerStack s;
      s.rank = who[i].rank;
      s.host = host_;
      s.pid = static_cast<int>(who[i].pid);
      s.gpu = who[i].gpu;
      if (i < stacks.size()) {
        s.pid = static_cast<int>(stacks[i].pid);
        s.mechanism = stacks[i].mechanism;
        s.text = std::move(stacks[i].text);
        s.error = std::move(stacks[i].error);
        if (s.text.size() > share) s.text.resize(share);
      } else {
        s.error = problem_.empty() ? "no stack collected" : problem_;
      }
      reply.workers.push_back(std::move(s));
    }
    std::lock_guard done(mu_);
    for (uint64_t asked : asked_) {
      reply.id = asked;
      answered_.push_back(reply);
    }
    asked_.clear();
    collecting_done_ = true;
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(stacks_ready_.get(), &one, sizeof one);
  });
}

std::vector<StacksReply> WorkerWatch::TakeStacks() {
  uint64_t count = 0;
  [[maybe_unused]] ssize_t n = ::read(stacks_ready_.get(), &count, sizeof count);
  std::lock_guard lock(mu_);
  return std::exchange(answered_, {});
}

}  // namespace distrun
