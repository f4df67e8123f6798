#include "launcher/remote/ssh_launch.h"

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "detect/errors.h"
#include "detect/parse.h"
#include "detect/random_hex.h"
#include "launcher/process/output.h"
#include "launcher/process/shell_quote.h"
#include "launcher/process/signal_names.h"
#include "launcher/process/unique_fd.h"
#include "launcher/remote/channel.h"
#include "launcher/remote/forwarded_env.h"
#include "launcher/remote/host_loss.h"
#include "launcher/remote/host_session.h"
#include "launcher/remote/local_host.h"
#include "launcher/remote/remote_command.h"
#include "launcher/remote/remote_node.h"
#include "launcher/remote/ssh_failure.h"

namespace distrun {
namespace {

using Clock = std::chrono::steady_clock;
using State = HostSession::State;

std::string SecondsText(double seconds) {
  std::ostringstream out;
  out << seconds << "s";
  return out.str();
}

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// The job token every host's distrun proves itself with: the user's (DISTRUN_TOKEN, --token-file), else a
// new one. It travels over the channel, never on a command line.
std::string JobToken(const Options& options, const Environment& env) {
  if (const std::string* t = env.Get("DISTRUN_TOKEN"); t != nullptr && !t->empty()) return *t;
  if (options.token_file) {
    std::ifstream in(*options.token_file);
    if (!in) throw UsageError("--token-file " + *options.token_file + ": cannot read it; check the path");
    std::string token;
    std::getline(in, token);
    if (token.empty())
      throw UsageError("--token-file " + *options.token_file + " is empty; put the token in it");
    return token;
  }
  return RandomHex(32);
}

class SshLaunch {
 public:
  SshLaunch(const Options& options, bool dry_run, const Environment& env, std::string version,
            std::shared_ptr<spdlog::logger> log)
      : options_(options), dry_run_(dry_run), env_(env), version_(std::move(version)), log_(std::move(log)) {}

  int Run();

 private:
  bool Check();
  void Start();
  int Supervise();
  // One wait for descriptors, signals and exits, at most `wait` long.
  void Pump(std::chrono::milliseconds wait);
  void OnLines(size_t i, bool is_stdout, const std::vector<std::string>& lines);
  void JudgeHello(HostSession& s);
  void Reap();
  void OnSignal(int sig);
  void SendAll(const std::string& text);
  int ExitCode() const;
  // Node 0's distrun ended by itself, and its end is the job's (host_loss.h).
  bool NodeZeroEnded() const {
    const HostSession& zero = sessions_.front();
    return zero.EndedNormally() && NodeZeroEndedTheJob(zero.exit_code(), options_.elastic.has_value());
  }
  bool Finished(const HostSession& s) {
    return s.child().pid() < 0 || (s.child().reaped() && !s.OutputOpen());
  }
  bool Finished(size_t i) { return Finished(sessions_[i]); }

  const Options& options_;
  bool dry_run_;
  const Environment& env_;
  std::string version_;
  std::shared_ptr<spdlog::logger> log_;
  std::string remote_distrun_;
  std::string cwd_;
  std::vector<HostSession> sessions_;
  std::vector<std::string> dry_run_output_;
  std::optional<rlimit> children_limit_;  // this process's own, when it raised it
  UniqueFd signals_;
  int signals_received_ = 0;
  int first_signal_ = 0;
};

int SshLaunch::Run() {
  if (options_.command.empty()) {
    throw UsageError("no command to run on the hosts; give one after -- (distrun -H a,b -- python train.py)");
  }
  const size_t n = options_.hosts.size();
  if (options_.nnodes && static_cast<size_t>(*options_.nnodes) != n) {
    throw UsageError("--nnodes " + std::to_string(*options_.nnodes) + " but " + std::to_string(n) +
                     " hosts are listed; list one host per node, or drop --nnodes");
  }
  if (options_.elastic && (n < static_cast<size_t>(options_.elastic->min_nodes) ||
                           n > static_cast<size_t>(options_.elastic->max_nodes))) {
    throw UsageError("--nnodes " + std::to_string(options_.elastic->min_nodes) + ":" +
                     std::to_string(options_.elastic->max_nodes) + " but " + std::to_string(n) +
                     " hosts are listed; list between MIN and MAX hosts");
  }
  if (options_.topology.num_nodes || options_.topology.node_rank || options_.topology.process_id) {
    throw UsageError(
        "--num-nodes, --node-rank and --process-id come from the host list with -H/--hostfile; "
        "drop them");
  }
  remote_distrun_ = options_.remote_distrun.value_or(env_.program);
  if (remote_distrun_.empty()) {
    throw UsageError("cannot tell this distrun's own path for the hosts; give --remote-distrun PATH");
  }
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) == nullptr) {
    throw UsageError(std::string("cannot tell the working directory: ") + std::strerror(errno));
  }
  cwd_ = cwd;
  for (const HostEntry& h : options_.hosts) {
    sessions_.emplace_back(h, h.user.empty() && IsThisMachine(h.host, env_.hostname));
  }
  // The launcher's own signals arrive here, not as handlers: Ctrl-C, a scheduler's SIGTERM, a closed
  // terminal, and its children's exits.
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) sigaddset(&set, sig);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signals_.Reset(::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC));
  ::signal(SIGPIPE, SIG_IGN);

  // Three pipes a host: a soft limit of 1,024 descriptors would refuse the 340th. The children get the
  // original limit back.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) children_limit_ = limit;
  }

  if (!Check()) return 2;
  Start();
  return Supervise();
}

bool SshLaunch::Check() {
  std::vector<std::string> vars;
  for (const auto& [k, v] : env_.vars) vars.push_back(k + "=" + v);
  // ssh's own ConnectTimeout says "timed out" first, where the connection is what hangs; this one catches a
  // login or a distrun that hangs after it.
  const auto timeout = Ms(options_.ssh_connect_timeout_s + 0.5);
  size_t next = 0;
  for (;;) {
    size_t connecting = 0;
    for (const HostSession& s : sessions_) connecting += s.state() == State::kConnecting;
    while (next < sessions_.size() && connecting < static_cast<size_t>(options_.ssh_concurrency)) {
      HostSession& s = sessions_[next++];
      SpawnSpec spec;
      spec.argv = s.local() ? std::vector<std::string>{env_.program, kRemoteNodeFlag}
                            : SshCommand(options_, s.entry(), remote_distrun_);
      spec.env = vars;
      spec.stdin_pipe = true;
      spec.descriptor_limit = children_limit_;
      s.Start(spec, cwd_);
      connecting += s.state() == State::kConnecting;
    }
    const auto now = Clock::now();
    auto wait = std::chrono::milliseconds(1000);
    bool open = next < sessions_.size();
    for (HostSession& s : sessions_) {
      if (s.state() != State::kConnecting) continue;
      if (s.child().reaped() && !s.OutputOpen()) {
        s.Fail(DescribeSshFailure(s.exit_code(), s.said(), remote_distrun_));
        continue;
      }
      if (now - s.started() >= timeout) {
        s.Fail("no answer within --ssh-connect-timeout " + SecondsText(options_.ssh_connect_timeout_s) +
               " (connect, log in, start distrun)");
        s.child().SignalGroup(SIGKILL);
        continue;
      }
      open = true;
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(s.started() + timeout - now));
    }
    for (HostSession& s : sessions_) {
      if (s.state() == State::kChecked && s.child().reaped()) {
        s.Fail("distrun there ended before the launch (exit code " + std::to_string(s.exit_code()) + ")");
      }
    }
    if (!open) break;
    if (signals_received_ > 0) break;  // Ctrl-C during the check: nothing has started
    Pump(std::max(wait, std::chrono::milliseconds(1)));
  }
  std::vector<HostCheck> table;
  bool all_ok = signals_received_ == 0;
  for (HostSession& s : sessions_) {
    const bool ok = s.state() == State::kChecked;
    all_ok = all_ok && ok;
    std::string outcome = ok ? "ok" : s.outcome();
    if (s.state() == State::kQueued || s.state() == State::kConnecting) outcome = "not checked (interrupted)";
    if (ok && s.local()) outcome = "ok (this machine, no ssh)";
    table.push_back({s.entry().Destination(), outcome, ok});
  }
  if (all_ok) return true;
  // Nothing started anywhere: each checked host's distrun ends at "abort"; ssh ends with it.
  for (HostSession& s : sessions_) {
    s.Send(FormatChannelLine("abort"));
    s.CloseInput();
    if (s.state() != State::kChecked) s.child().SignalGroup(SIGTERM);
  }
  // A short wait for them to go by themselves, so that the deadline plus this stays under a second past
  // --ssh-connect-timeout; each Child's destructor kills what is left of its process group.
  const auto give_up = Clock::now() + std::chrono::milliseconds(400);
  while (Clock::now() < give_up &&
         !std::all_of(sessions_.begin(), sessions_.end(), [&](HostSession& s) { return Finished(s); })) {
    Pump(std::chrono::milliseconds(50));
  }
  size_t failed = 0;
  for (const HostCheck& c : table) failed += !c.ok;
  if (signals_received_ > 0) {
    log_->error("interrupted during the check of the hosts; nothing was started");
  } else {
    std::string text = FormatCheckTable(table);
    text.pop_back();  // the logger ends the line
    log_->error("{} of {} hosts failed the check before the launch; nothing was started:\n{}", failed,
                sessions_.size(), text);
  }
  return false;  // each Child's destructor kills what is left of its process group
}

void SshLaunch::Start() {
  std::vector<std::string> vars = ForwardedVariables(env_.vars, options_.forward_env);
  vars.push_back("DISTRUN_TOKEN=" + JobToken(options_, env_));
  const std::string run_id = options_.run_id.value_or(RandomHex(12));
  NodeZero zero;
  const HostSession& first = sessions_.front();
  // The other hosts cannot reach this machine as "localhost": they get its host name.
  zero.host = IsLoopback(first.entry().host) ? env_.hostname : first.entry().host;
  zero.port = first.hello()->free_port;
  if (options_.topology.coordinator_address) {
    HostPort hp = ParseHostPort("--coordinator-address", *options_.topology.coordinator_address);
    zero.host = hp.host;
    if (hp.port) zero.port = *hp.port;
  }
  if (options_.topology.coordinator_port) zero.port = *options_.topology.coordinator_port;
  if (zero.port == 0)
    throw UsageError("no free port on the first host for the job's service; give --coordinator-port");
  dry_run_output_.resize(sessions_.size());
  for (size_t i = 0; i < sessions_.size(); ++i) {
    HostSession& s = sessions_[i];
    StartMessage m;
    m.argv = RemoteDistrunArgs(options_, s.local() ? env_.program : remote_distrun_, i, sessions_.size(),
                               zero, run_id, s.entry().slots, dry_run_);
    m.env = vars;
    if (dry_run_) {
      std::vector<std::string> ssh = s.local() ? std::vector<std::string>{env_.program, kRemoteNodeFlag}
                                               : SshCommand(options_, s.entry(), remote_distrun_);
      dry_run_output_[i] = "== " + s.entry().Destination() + ": node " + std::to_string(i) + " of " +
                           std::to_string(sessions_.size()) + (s.local() ? ", this machine (no ssh)" : "") +
                           " ==\nreached by        " + ShellJoin(ssh) + "\nruns              " +
                           ShellJoin(m.argv) + "\n";
    }
    s.Send(FormatStart(m));
    s.MarkRunning();
  }
  log_->debug("started the job on {} hosts; node 0 serves it at {}:{}", sessions_.size(), zero.host,
              zero.port);
}

int SshLaunch::Supervise() {
  auto next_alive = Clock::now() + Ms(kChannelAliveIntervalS);
  std::optional<Clock::time_point> give_up;  // node 0 has ended: the others follow by then, or are stopped
  int escalation = 0;
  for (;;) {
    if (std::all_of(sessions_.begin(), sessions_.end(), [&](HostSession& s) { return Finished(s); })) break;
    const auto now = Clock::now();
    if (now >= next_alive) {
      for (HostSession& s : sessions_) {
        if (s.state() == State::kRunning && !s.WantsToWrite()) s.Send(FormatChannelLine("alive"));
      }
      next_alive = now + Ms(kChannelAliveIntervalS);
    }
    // Node 0's distrun ended the job (a lost node 0 is not the job's end: an elastic job's standby goes on).
    if (!give_up && NodeZeroEnded()) {
      give_up = now + Ms(options_.grace_period_s + options_.heartbeat_timeout_s + 2);
    }
    if (give_up && now >= *give_up) {
      // Hosts still running this long after node 0's end: stop them as the launcher's own end would.
      ++escalation;
      for (HostSession& s : sessions_) {
        if (s.child().reaped()) continue;
        if (escalation == 1) {
          log_->warn("{} is still running after node 0 ended; stopping it", s.entry().Destination());
          s.Send(FormatChannelLine("kill"));
          s.CloseInput();
        } else {
          s.child().SignalGroup(SIGKILL);
        }
      }
      give_up = now + std::chrono::seconds(2);
    }
    Pump(std::chrono::ceil<std::chrono::milliseconds>(std::min(next_alive, give_up.value_or(next_alive)) -
                                                      now));
  }
  if (dry_run_) {
    for (const std::string& out : dry_run_output_) (void)WriteAll(STDOUT_FILENO, out);
  }
  return ExitCode();
}

// Once, as a host's hello arrives: the same distrun, and the launcher's working directory there.
void SshLaunch::JudgeHello(HostSession& s) {
  const Hello& h = *s.hello();
  if (h.protocol != kChannelProtocol || h.version != version_) {
    s.Fail("distrun " + h.version + " at " + remote_distrun_ + " there, and this is " + version_ +
           ": install the same version on every host (or give --remote-distrun)");
  } else if (!h.cwd_problem.empty()) {
    s.Fail("the working directory " + cwd_ + " is not there (" + h.cwd_problem +
           "): launch from a directory every host has");
  }
}

int SshLaunch::ExitCode() const {
  if (first_signal_ != 0) return 128 + first_signal_;
  // Node 0's distrun's code is the job's; where node 0 was lost, that of the hosts that ended by themselves
  // (an elastic job's survivors: its standby's 0, or the code the job ended with).
  const HostSession& zero = sessions_.front();
  if (NodeZeroEnded()) return zero.exit_code();
  bool any = false;
  for (size_t i = 1; i < sessions_.size(); ++i) {
    const HostSession& s = sessions_[i];
    if (!s.EndedNormally()) continue;
    if (s.exit_code() != 0) return s.exit_code();
    any = true;
  }
  return any ? 0 : 1;
}

void SshLaunch::SendAll(const std::string& text) {
  for (HostSession& s : sessions_) {
    if (s.state() == State::kRunning) s.Send(text);
  }
}

void SshLaunch::OnSignal(int sig) {
  if (sig == SIGCHLD) return;
  ++signals_received_;
  if (first_signal_ == 0) first_signal_ = sig;
  const bool running = std::any_of(sessions_.begin(), sessions_.end(),
                                   [](const HostSession& s) { return s.state() == State::kRunning; });
  if (!running) return;
  if (signals_received_ == 1) {
    log_->warn(
        "received {}; stopping the job on every host (SIGTERM now, SIGKILL after --grace-period {}s; "
        "a second signal kills at once)",
        SignalName(sig), options_.grace_period_s);
    SendAll(FormatChannelLine("term"));
  } else if (signals_received_ == 2) {
    log_->warn("received {} again; killing the workers on every host", SignalName(sig));
    SendAll(FormatChannelLine("kill"));
  }
}

void SshLaunch::Pump(std::chrono::milliseconds wait) {
  std::vector<pollfd> fds;
  std::vector<std::pair<size_t, int>> what;  // session, 0 stdout / 1 stderr / 2 stdin
  fds.push_back({signals_.get(), POLLIN, 0});
  what.emplace_back(SIZE_MAX, -1);
  for (size_t i = 0; i < sessions_.size(); ++i) {
    Child& c = sessions_[i].child();
    if (c.stdout_pipe()) {
      fds.push_back({c.stdout_pipe().get(), POLLIN, 0});
      what.emplace_back(i, 0);
    }
    if (c.stderr_pipe()) {
      fds.push_back({c.stderr_pipe().get(), POLLIN, 0});
      what.emplace_back(i, 1);
    }
    if (sessions_[i].WantsToWrite()) {
      fds.push_back({c.stdin_pipe().get(), POLLOUT, 0});
      what.emplace_back(i, 2);
    }
  }
  const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<int64_t>(wait.count(), 0)));
  if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
  for (size_t k = 0; ready > 0 && k < fds.size(); ++k) {
    if (fds[k].revents == 0) continue;
    auto [i, kind] = what[k];
    if (i == SIZE_MAX) {
      signalfd_siginfo info;
      while (::read(signals_.get(), &info, sizeof info) == sizeof info)
        OnSignal(static_cast<int>(info.ssi_signo));
      continue;
    }
    if (kind == 2) {
      if (fds[k].revents & (POLLERR | POLLHUP)) {
        sessions_[i].CloseInput();
      } else {
        sessions_[i].Flush();
      }
      continue;
    }
    OnLines(i, kind == 0, sessions_[i].Read(kind == 0));
  }
  Reap();
}

void SshLaunch::OnLines(size_t i, bool is_stdout, const std::vector<std::string>& lines) {
  HostSession& s = sessions_[i];
  for (const std::string& line : lines) {
    if (s.state() == State::kConnecting || s.state() == State::kQueued) {
      if (is_stdout) {
        s.TakeLine(line);
        if (s.state() == State::kChecked) JudgeHello(s);
      } else {
        s.KeepSaid(line);
      }
      continue;
    }
    if (s.state() == State::kFailed || s.state() == State::kChecked) continue;
    std::string text = line;
    // distrun's own messages from each host say which host: "distrun[node2]: error: ...".
    if (!is_stdout && text.starts_with("distrun: ")) {
      text = "distrun[" + s.entry().host + "]: " + text.substr(9);
    }
    if (dry_run_) {
      dry_run_output_[i] += text;
    } else {
      (void)WriteAll(is_stdout ? STDOUT_FILENO : STDERR_FILENO, text);  // a closed console: the job goes on
    }
  }
}

void SshLaunch::Reap() {
  for (size_t i = 0; i < sessions_.size(); ++i) {
    HostSession& s = sessions_[i];
    Child& c = s.child();
    if (c.pid() <= 0 || c.reaped()) continue;
    int status = 0;
    const pid_t pid = ::waitpid(c.pid(), &status, WNOHANG);
    if (pid != c.pid()) continue;
    s.Ended(status);
    if (s.state() != State::kEnded || dry_run_ || s.killed_by_signal()) continue;
    const std::string lost =
        DescribeLostHost(s.entry().Destination(), i, s.exit_code(), options_.elastic.has_value());
    if (!lost.empty()) log_->error("{}", lost);
  }
}

}  // namespace

int RunSshLaunch(const Options& options, bool dry_run, const Environment& env, const std::string& version,
                 std::shared_ptr<spdlog::logger> log) {
  SshLaunch launch(options, dry_run, env, version, std::move(log));
  return launch.Run();
}

}  // namespace distrun
