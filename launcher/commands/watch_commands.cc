#include "launcher/commands/watch_commands.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>

#include "detect/errors.h"
#include "detect/parse.h"
#include "launcher/commands/command_auth.h"
#include "launcher/config/options.h"
#include "launcher/report/stacks_view.h"
#include "runtime/progress/progress_board.h"
#include "runtime/service/message_text.h"
#include "runtime/transport/grpc_client.h"

namespace distrun {
namespace {

using Env = std::map<std::string, std::string, std::less<>>;

constexpr int kUsageExit = 2;
constexpr int kServiceExit = 3;
constexpr std::chrono::milliseconds kCallTimeout{10'000};
constexpr std::chrono::milliseconds kStacksWait{15'000};
// A straggler in `distrun status`: this far behind the median, in the median rank's time, or this much
// slower than the median rate (NVRx's straggler threshold).
constexpr double kBehindSeconds = 10;
constexpr double kSlowRate = 0.7;

constexpr const char* kProgressUsage =
    "usage: distrun progress STEP\n"
    "Tells distrun's hang watch that this worker reached STEP (an integer that grows as the job advances).\n"
    "Run it from a worker of distrun; it writes to shared memory and returns in about a millisecond.\n"
    "Programs call distrun_progress() (<distrun/client.h>) or distrun.progress() (Python) instead.\n";

constexpr const char* kStacksUsage =
    "usage: distrun stacks [--timeout SECONDS] [--full] [--output FILE]\n"
    "Collects the current stack of every worker on every node of the running job, without stopping it, and\n"
    "prints them merged into one tree: each branch carries the ranks that took it ([3] ranks 0-2), so the\n"
    "ranks that are somewhere else stand out, named with host, pid and GPU.\n"
    "  --timeout SECONDS  how long to wait for the nodes' answers (default 15)\n"
    "  --full             print every rank's stack and the whole tree instead of one screen\n"
    "  --output FILE      also write the full dump to FILE\n"
    "How each worker's stack is taken:\n"
    "  Python workers: faulthandler, in the worker itself. distrun puts a sitecustomize.py on every "
    "worker's\n"
    "    PYTHONPATH that registers a dump on a real-time signal (SIGRTMIN+5); it chains to the\n"
    "    sitecustomize it shadows. No ptrace, no gdb, works while the worker holds the GIL in a deadlock.\n"
    "    Python frames only. Not for `python3 -I` or `-S` (no sitecustomize): those are native workers.\n"
    "    A stopped worker (SIGSTOP, state T) cannot dump: it is named as stopped.\n"
    "  Other workers: gdb -p PID -batch -ex 'thread apply all bt' (install gdb). gdb attaches with ptrace,\n"
    "    pausing the worker for a fraction of a second. Needs ptrace permission: same user, and under Yama\n"
    "    (kernel.yama.ptrace_scope) 1 distrun registers itself as the workers' tracer (PR_SET_PTRACER), so\n"
    "    it works for the worker process itself; 2 needs CAP_SYS_PTRACE; 3 forbids it. Containers need\n"
    "    CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE) where seccomp blocks ptrace.\n"
    "  Where a mechanism is missing, the rank's branch says why in one line.\n"
    "Run it where the job's DISTRUN_COORDINATOR_ADDRESS and DISTRUN_TOKEN are set: in a worker, or in\n"
    "`srun --overlap --jobid JOB` with them exported. Where munge protects the job, the address is enough:\n"
    "the call carries a munge credential of your user (DISTRUN_MUNGE_SOCKET names munged's socket). Exit\n"
    "codes: 0; 2 usage; 3 the runtime cannot be reached or refused the call.\n";

constexpr const char* kStatusUsage =
    "usage: distrun status\n"
    "Shows the running job as node 0 sees it: its state and epoch, each node, and each rank that reports\n"
    "progress: its last step, its rate over the last minute and the age of its last report. Ranks far\n"
    "behind the median (more than 10 s of the median rank's progress) or slower than 0.7 times the median\n"
    "rate are flagged. Run it where the job's DISTRUN_COORDINATOR_ADDRESS and DISTRUN_TOKEN are set, or\n"
    "only the address where munge protects the job (see distrun stacks --help).\n";

const std::string* Get(const Env& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

int Progress(const std::vector<std::string>& args, const Env& env) {
  if (args.size() != 2)
    throw UsageError("distrun progress takes one step number; see distrun progress --help");
  int64_t step = 0;
  try {
    size_t used = 0;
    step = std::stoll(args[1], &used);
    if (used != args[1].size()) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw UsageError("distrun progress: '" + args[1] + "' is not a step number (an integer)");
  }
  const std::string* file = Get(env, kProgressFileVariable);
  const std::string* slot = Get(env, kProgressSlotVariable);
  if (!file || !slot) {
    throw UsageError(std::string("distrun progress: ") + kProgressFileVariable + " and " +
                     kProgressSlotVariable + " are not set; run it as a worker of distrun");
  }
  int slot_number = -1;
  try {
    slot_number = std::stoi(*slot);
  } catch (const std::exception&) {
    throw UsageError(std::string("distrun progress: ") + kProgressSlotVariable + "='" + *slot +
                     "' is not a slot");
  }
  std::string error;
  std::optional<ProgressBoard> board = ProgressBoard::Open(*file, slot_number, &error);
  if (!board) throw UsageError("distrun progress: " + error + " (has the job ended?)");
  board->Report(slot_number, step);
  return 0;
}

GrpcClient Connect(const Env& env, const char* verb, std::string* address, CommandAuth* auth) {
  const std::string* a = Get(env, "DISTRUN_COORDINATOR_ADDRESS");
  if (!a) {
    throw UsageError(std::string("distrun ") + verb +
                     ": DISTRUN_COORDINATOR_ADDRESS is not set; run it in a worker of the job, or export the "
                     "job's DISTRUN_COORDINATOR_ADDRESS (and DISTRUN_TOKEN unless munge protects the job)");
  }
  *address = *a;
  GrpcClientConfig c;
  c.address = *a;
  *auth = SetCommandAuth(env, &c);
  c.call_timeout = kCallTimeout;
  c.wait_for_ready = false;  // a job that has ended refuses at once: say so at once
  c.max_message_bytes = size_t{256} << 20;
  return GrpcClient(c);
}

int ServiceFailed(const char* verb, const Status& s, const std::string& address, const CommandAuth& auth) {
  if (s.code == StatusCode::kUnauthenticated) {
    std::fprintf(stderr, "distrun: %s: %s\n", verb, RefusalMessage(auth, address, s.message).c_str());
  } else {
    // The client's message names the address already.
    const std::string what = s.message.empty() ? "cannot reach the distrun runtime at " + address : s.message;
    std::fprintf(stderr, "distrun: %s: %s; is the job still running?\n", verb, what.c_str());
  }
  return kServiceExit;
}

int Stacks(const std::vector<std::string>& args, const Env& env) {
  std::chrono::milliseconds wait = kStacksWait;
  bool full = false;
  std::optional<std::string> output;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* name) {
      if (i + 1 == args.size()) throw UsageError(std::string("distrun stacks: ") + name + " needs a value");
      return args[++i];
    };
    if (a == "--timeout") {
      wait = std::chrono::milliseconds(
          static_cast<int64_t>(ParseSeconds("--timeout", value("--timeout")) * 1000));
      if (wait.count() < 100) throw UsageError("distrun stacks: use a --timeout of at least 0.1 seconds");
    } else if (a == "--full") {
      full = true;
    } else if (a == "--output") {
      output = value("--output");
    } else {
      throw UsageError("distrun stacks: unknown argument '" + a + "'; see distrun stacks --help");
    }
  }
  std::string address;
  CommandAuth auth;
  GrpcClient client = Connect(env, "stacks", &address, &auth);
  StacksReply reply;
  if (Status s = client.Stacks(wait, &reply); !s.ok()) return ServiceFailed("stacks", s, address, auth);
  StacksPicture picture = DrawStacks(reply, full ? 0 : kStacksScreenLines);
  std::fputs((full ? picture.full : picture.screen).c_str(), stdout);
  if (output) {
    std::ofstream out(*output);
    out << picture.full;
    if (!out.flush()) {
      std::fprintf(stderr, "distrun: stacks: cannot write %s\n", output->c_str());
      return kUsageExit;
    }
  }
  return 0;
}

std::string Rate(double steps_per_second) {
  char buf[32];
  std::snprintf(buf, sizeof buf, steps_per_second >= 10 ? "%.0f" : "%.2f", steps_per_second);
  return buf;
}

// Every rank's straggler score: the fastest rank's median ÷ its own, in its worst section.
void PrintStragglers(const JobStatusView& v) {
  if (v.sections.empty()) {
    std::printf("no rank marks sections (distrun.section, distrun_section_enter): no straggler scores\n");
    return;
  }
  std::printf("straggler scores (fastest rank's median / the rank's; below %.2f for a while: a straggler)\n",
              v.straggler_threshold);
  std::printf("%6s %-20s %6s  %s\n", "rank", "host", "score", "worst section (median)");
  for (const RankSectionMedians& r : v.sections) {
    char score[16] = "-";
    if (r.score >= 0) std::snprintf(score, sizeof score, "%.2f", r.score);
    std::string worst;
    if (auto it = r.median_s.find(r.section); it != r.median_s.end()) {
      char median[48];
      std::snprintf(median, sizeof median, "%s (%.3f s)", r.section.c_str(), it->second);
      worst = median;
    }
    std::printf("%6d %-20s %6s  %s%s\n", r.rank, r.host.c_str(), score, worst.c_str(),
                r.straggler ? "  STRAGGLER" : "");
  }
}

int StatusVerb(const std::vector<std::string>& args, const Env& env) {
  if (args.size() != 1) throw UsageError("distrun status takes no arguments; see distrun status --help");
  std::string address;
  CommandAuth auth;
  GrpcClient client = Connect(env, "status", &address, &auth);
  JobStatusView v;
  if (Status s = client.Describe(&v); !s.ok()) return ServiceFailed("status", s, address, auth);
  static constexpr const char* kStates[] = {"forming (rendezvous)", "running", "succeeded", "stopped"};
  std::printf("job %s, epoch %d, %d node(s)\n", kStates[static_cast<size_t>(v.state)], v.epoch, v.num_nodes);
  if (!v.history.empty()) std::printf("history: %s\n", v.history.c_str());
  for (const std::string& n : v.nodes) std::printf("  %s\n", n.c_str());
  if (v.recoveries_in_place + v.recoveries_restart > 0) {
    std::printf("recoveries: %llu in place, %llu by restart\n",
                static_cast<unsigned long long>(v.recoveries_in_place),
                static_cast<unsigned long long>(v.recoveries_restart));
    // The latest few, oldest first: each with its phases once complete.
    const size_t shown = std::min<size_t>(v.recoveries.size(), 5);
    for (size_t i = v.recoveries.size() - shown; i < v.recoveries.size(); ++i) {
      const RecoveryRecord& r = v.recoveries[i];
      std::printf("  %s%s\n",
                  r.complete ? DescribeRecovery(r).c_str()
                             : ("generation " + std::to_string(r.generation) + ": " + r.cause).c_str(),
                  r.complete ? "" : " (recovering)");
    }
  }
  PrintStragglers(v);
  if (v.ranks.empty()) {
    std::printf(
        "no rank reports progress (distrun progress, distrun_progress(), distrun.progress()): the hang "
        "watch is not armed\n");
    return 0;
  }
  std::printf("hang watch: %s\n",
              v.hang_timeout ? ("hung after " + FormatSeconds(*v.hang_timeout) + " without progress" +
                                (v.hang_timeout_learned ? " (learned)" : " (--hang-timeout)"))
                                   .c_str()
                             : "off (--hang-timeout off)");
  std::vector<int64_t> steps;
  std::vector<double> rates;
  for (const RankProgress& r : v.ranks) {
    steps.push_back(r.step);
    rates.push_back(r.steps_per_second);
  }
  std::sort(steps.begin(), steps.end());
  std::sort(rates.begin(), rates.end());
  const int64_t median_step = steps[steps.size() / 2];
  const double median_rate = rates[rates.size() / 2];
  std::printf("%6s %12s %9s %12s\n", "rank", "step", "steps/s", "last report");
  for (const RankProgress& r : v.ranks) {
    std::string flag;
    const int64_t lag = median_step - r.step;
    if (lag > 0 && ((median_rate > 0 && static_cast<double>(lag) / median_rate >= kBehindSeconds) ||
                    (median_rate <= 0 && r.advanced_ms_ago > 10'000))) {
      flag = "  behind: " + std::to_string(lag) + " steps behind the median (" + std::to_string(median_step) +
             ")";
    } else if (median_rate > 0 && r.steps_per_second < kSlowRate * median_rate) {
      flag = "  slow: " + Rate(r.steps_per_second / median_rate) + "x the median rate";
    }
    std::printf("%6d %12lld %9s %10s ago (pid %d)%s\n", r.rank, static_cast<long long>(r.step),
                Rate(r.steps_per_second).c_str(),
                FormatSeconds(std::chrono::milliseconds(r.reported_ms_ago)).c_str(), r.pid, flag.c_str());
  }
  return 0;
}

}  // namespace

bool IsWatchVerb(const std::string& word) {
  return word == "progress" || word == "stacks" || word == "status";
}

int RunWatchVerb(const std::vector<std::string>& args, const Env& env) {
  const bool help = std::any_of(args.begin() + 1, args.end(),
                                [](const std::string& a) { return a == "-h" || a == "--help"; });
  try {
    if (args[0] == "progress") {
      if (help) return std::fputs(kProgressUsage, stdout), 0;
      return Progress(args, env);
    }
    if (args[0] == "stacks") {
      if (help) return std::fputs(kStacksUsage, stdout), 0;
      return Stacks(args, env);
    }
    if (help) return std::fputs(kStatusUsage, stdout), 0;
    return StatusVerb(args, env);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "distrun: error: %s\n", e.what());
    return kUsageExit;
  }
}

}  // namespace distrun
