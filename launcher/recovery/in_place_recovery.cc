#include "launcher/recovery/in_place_recovery.h"

#include <spdlog/logger.h>

#include <algorithm>
#include <limits>

#include "detect/parse.h"

namespace distrun {
namespace {

int64_t Ms(InPlaceRecovery::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

InPlaceRecovery::InPlaceRecovery(size_t slots, std::chrono::milliseconds timeout, RecoveryActions& actions,
                                 std::shared_ptr<spdlog::logger> log)
    : slots_(slots), timeout_(timeout), actions_(actions), log_(std::move(log)) {}

void InPlaceRecovery::Started(size_t slot, pid_t pid, int rank, Clock::time_point now) {
  Slot& s = slots_.at(slot);
  s = Slot{};
  s.running = true;
  s.pid = pid;
  s.rank = rank;
  s.after_handout = generation_ >= 0;
  s.seatless = generation_ >= 0 && worlds_.empty();
  JoinIfReady(now);
}

void InPlaceRecovery::Exited(size_t slot) {
  Slot& s = slots_.at(slot);
  s.running = false;
  s.connected = false;
}

void InPlaceRecovery::Disconnected(size_t slot) { slots_.at(slot).connected = false; }

bool InPlaceRecovery::Settled(const Slot& s, int generation) const {
  return !s.running || s.world < 0 || s.ready_for >= generation;
}

std::vector<int> InPlaceRecovery::FreshSlots() const {
  std::vector<int> fresh;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].running || slots_[i].world < 0) fresh.push_back(static_cast<int>(i));
  }
  return fresh;
}

void InPlaceRecovery::OnMessage(size_t slot, const WorkerMessage& m, Clock::time_point now) {
  Slot& s = slots_.at(slot);
  if (m.name == "hello") {
    const HelloMessage hello = HelloFrom(m);
    s.connected = true;
    s.spoke = true;
    if (hello.pid != s.pid) {
      log_->debug("rank {}'s worker channel is held by pid {}, a process of the worker (pid {})", s.rank,
                  hello.pid, s.pid);
    }
    // A worker of the running world gets it now. One that arrives while a change forms waits for that; so
    // does one started again since the world was handed out: its end began the next change.
    if (!pending_ && !worlds_.empty() && s.world < generation_ && !s.after_handout) SendWorld(slot);
    JoinIfReady(now);
  } else if (m.name == "ready") {
    s.ready_for = std::max(s.ready_for, GenerationOf(m));
    JoinIfReady(now);
  } else if (m.name == "up") {
    s.up = std::max(s.up, GenerationOf(m));
    ReportIfUp(now);
  } else {
    throw WorkerMessageError("'" + m.name + "' is not a message a worker sends (hello, ready or up)");
  }
}

void InPlaceRecovery::Change(int generation, Clock::time_point now) {
  if (generation <= generation_ || (pending_ && generation <= *pending_)) return;
  pending_ = generation;
  joining_ = false;
  noticed_ = now;
  deadline_ = now + timeout_;
  reported_ = false;
  watching_ = false;
  last_ = NodeRecovery{};
  last_.generation = generation;
  last_.notified_ms = 0;    // the notices go out now (or the workers that cannot take them start again)
  hello_deadline_.reset();  // the next handout sets it again
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    if (!s.running) continue;
    if (s.world >= 0 && s.connected) {
      actions_.Send(i, GenerationMessage("changed", generation));
    } else if (s.world >= 0) {
      actions_.Restart(i, "rank " + std::to_string(s.rank) + " (pid " + std::to_string(s.pid) +
                              ") closed its connection to distrun, so it cannot take generation " +
                              std::to_string(generation) + "'s world in place: started again");
    } else if (!s.spoke && !s.after_handout && !s.seatless) {
      // It runs the world's ranks without distrun.torch. A spare's silent worker is not taken for one: it is
      // most likely still importing, and a restart would throw that away (RestartSilentSpares).
      actions_.Restart(i, "rank " + std::to_string(s.rank) + " (pid " + std::to_string(s.pid) +
                              ") never spoke to distrun's worker channel (it does not call "
                              "distrun.torch.init_process_group()), so it cannot take generation " +
                              std::to_string(generation) + "'s world in place: started again");
    }
  }
  JoinIfReady(now);
}

void InPlaceRecovery::JoinIfReady(Clock::time_point now) {
  if (!pending_ || joining_) return;
  for (const Slot& s : slots_) {
    if (!Settled(s, *pending_)) return;
  }
  joining_ = true;
  ready_at_ = now;
  last_.ready_ms = Ms(now - noticed_);
  actions_.Join(*pending_, FreshSlots());
}

void InPlaceRecovery::Tick(Clock::time_point now) {
  RestartSilentSpares(now);
  if (!pending_ || joining_ || now < deadline_) return;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (Settled(s, *pending_)) continue;
    actions_.Restart(i, "rank " + std::to_string(s.rank) + " (pid " + std::to_string(s.pid) +
                            ") did not reach generation " + std::to_string(*pending_) + " within " +
                            FormatSeconds(timeout_) +
                            " (--recovery-timeout): it did not call distrun.torch.recover(), or is stuck; "
                            "started again");
  }
  JoinIfReady(now);
}

void InPlaceRecovery::RestartSilentSpares(Clock::time_point now) {
  if (!hello_deadline_ || pending_ || now < *hello_deadline_) return;
  hello_deadline_.reset();
  for (size_t i = 0; i < slots_.size(); ++i) {
    const Slot& s = slots_[i];
    if (!s.running || !s.seatless || s.spoke || s.world >= 0) continue;
    actions_.Restart(i, "rank " + std::to_string(s.rank) + " (pid " + std::to_string(s.pid) +
                            ") never spoke to distrun's worker channel within " + FormatSeconds(timeout_) +
                            " (--recovery-timeout) of generation " + std::to_string(generation_) +
                            "'s world (it does not call distrun.torch.init_process_group(), or its start is "
                            "stuck): started again");
    // The new process runs with this world's variables already: it takes the world on hello.
    slots_[i].after_handout = false;
  }
}

std::optional<InPlaceRecovery::Clock::time_point> InPlaceRecovery::NextDeadline() const {
  if (pending_ && !joining_) return deadline_;
  if (!pending_ && hello_deadline_) return hello_deadline_;
  return std::nullopt;
}

void InPlaceRecovery::Handout(int generation, std::vector<WorldMessage> worlds, Clock::time_point now) {
  generation_ = generation;
  pending_.reset();
  joining_ = false;
  handed_at_ = now;
  hello_deadline_.reset();
  worlds_ = std::move(worlds);
  if (!reported_ && last_.generation == generation) {
    last_.world_ms = Ms(now - noticed_);
    // First steps count from here, against the reports seen so far.
    baseline_.assign(slots_.size(), 0);
    for (size_t i = 0; i < slots_.size() && i < reports_.size(); ++i) baseline_[i] = reports_[i].count;
    first_step_.assign(slots_.size(), std::nullopt);
    watching_ = !worlds_.empty();
  }
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& s = slots_[i];
    s.after_handout = false;
    if (worlds_.empty() && s.running && s.world < 0) s.seatless = true;
    if (s.running && s.seatless && !s.spoke && i < worlds_.size()) hello_deadline_ = now + timeout_;
    if (i < worlds_.size()) worlds_[i].is_new = s.world < 0;
    if (s.running && s.connected && i < worlds_.size()) SendWorld(i);
  }
  ReportIfUp(now);
}

void InPlaceRecovery::SendWorld(size_t slot) {
  Slot& s = slots_[slot];
  WorldMessage& w = worlds_[slot];
  w.is_new = s.world < 0;
  if (actions_.Send(slot, ToMessage(w))) s.world = generation_;
}

void InPlaceRecovery::ReportIfUp(Clock::time_point now) {
  if (reported_ || pending_ || worlds_.empty()) return;
  for (size_t i = 0; i < slots_.size() && i < worlds_.size(); ++i) {
    const Slot& s = slots_[i];
    if (s.running && s.up < generation_) return;
  }
  reported_ = true;
  last_.up_ms = Ms(now - noticed_);
  const WorldMessage& w = worlds_.front();
  // Node 0 prints the job's line (every node's phases); each node's own is for -v.
  log_->debug(
      "generation {}: recovered in place (lost rank(s) {}, new process(es) at rank(s) {}, state from rank "
      "{}); this node: notice to ready {} ms, to world {} ms, to group up {} ms",
      generation_, w.lost.empty() ? "none" : FormatRanks(w.lost),
      w.joined.empty() ? "none" : FormatRanks(w.joined), w.source, Ms(ready_at_ - noticed_),
      Ms(handed_at_ - noticed_), Ms(now - noticed_));
}

}  // namespace distrun

namespace distrun {

void InPlaceRecovery::Progress(const std::vector<Reports>& reports) {
  reports_ = reports;
  if (!watching_) return;
  bool all = true;
  std::optional<Clock::time_point> latest;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].running || i >= worlds_.size()) continue;
    if (!first_step_[i] && i < reports.size() && reports[i].count > baseline_[i]) {
      // The first report after the handout: exact when it is the only one since (the caller reads often
      // while it watches); later ones only say it stepped by then.
      first_step_[i] = Clock::time_point(std::chrono::nanoseconds(reports[i].time_ns));
    }
    if (!first_step_[i]) {
      all = false;
    } else if (!latest || *first_step_[i] > *latest) {
      latest = first_step_[i];
    }
  }
  if (!all || !latest) return;
  watching_ = false;
  last_.first_step_ms = std::max<int64_t>(Ms(*latest - noticed_), 0);
}

}  // namespace distrun
