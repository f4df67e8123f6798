// distrun-bench: benchmark programs; each prints a readable summary and JSON on its last line(s).
//   distrun-bench detect [--distrun PATH] [--runs N]
//   distrun-bench launch [--distrun PATH] [--runs N] [--nproc N]
//   distrun-bench rendezvous [--agents N[,N...]] [--agents-per-connection K] [--threads T]
//                            [--client framed|raw|grpc] [--heartbeat-ms MS] [--heartbeat-timeout-ms MS]
//                            [--hold-s S]
//                            [--perf FILE]
//   distrun-bench kv [--clients N] [--seconds S] [--perf FILE]
//   distrun-bench agent-memory [--distrun PATH]
//   distrun-bench failure [--distrun PATH] [--runs|--trials N] [--nproc|--workers N]
//                         [--srun-nodes N [--lab DIR]]
//   distrun-bench srun [--distrun PATH] [--nodes N] [--runs N] [--lab DIR]      (on the Slurm lab)
//   distrun-bench elastic [--agents N[,N...]] [--trials K] [--threads T] [--heartbeat-timeout-ms MS] [--in-place 1]
//   distrun-bench stack-merge [--stacks N[,N...]] [--frames F] [--threads T]
//   distrun-bench torch-store [--ranks N[,N...]] [--ranks-per-connection K] [--threads T]
//                             [--torch-timeout-s S] [--torch-max-ranks N] [--servers torch,distrun] [--pin
//                             0|1] [--torch-python PATH] [--torch-libuv -|0|1|0,1] [--store-threads N]
//   distrun-bench python-site [--python PATH] [--runs N]
//   distrun-bench standby [--sets N]   (what write-through to the standby adds to a key-value set)
//   distrun-bench takeover [--agents N[,N...]] [--trials K] [--threads T] [--job-keys K]
//                          (node 0 lost: the standby's service from its copy to every survivor's next epoch)
//   distrun-bench scrape [--ranks N[,N...]] [--scrapes K] [--agents 1 [--seconds S]]
//                        (--metrics-address's cost at node 0; --agents 1: with simulated agents)
//   distrun-bench guard [--distrun PATH] [--floor PATH] [--recorded FILE] [--repeats N] [--as-built 1]
//                       (the hot path's ratios, ~1 min; of installed copies of the programs unless
//                       --as-built)
// Helpers the benchmarks run as child processes: coordinator, kv-client, agent, failure-worker.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "flags.h"

namespace distrun::bench {
int DetectStartupBench(const std::string& distrun, int runs);
int LaunchBench(const std::string& distrun, int runs, int nproc);
int GuardBench(const Flags& flags);
int RendezvousBench(const Flags& flags);
int CoordinatorMain(const Flags& flags);
int KvBench(const Flags& flags);
int KvClientMain(const Flags& flags);
int AgentMemoryBench(const Flags& flags);
int AgentMain(const Flags& flags);
int FailureBench(const Flags& flags);
int FailureWorkerMain(const Flags& flags);
int SrunBench(const Flags& flags);
int ElasticBench(const Flags& flags);
int StackMergeBench(const Flags& flags);
int TorchStoreBench(const Flags& flags);
int PythonSiteBench(const Flags& flags);
int StandbyBench(const Flags& flags);
int TakeoverBench(const Flags& flags);
int ScrapeBench(const Flags& flags);
}  // namespace distrun::bench

namespace {

constexpr char kUsage[] =
    "usage: distrun-bench detect|launch|rendezvous|kv|agent-memory|failure|srun|elastic|stack-merge|"
    "torch-store|python-site|standby|takeover|scrape|guard "
    "[--flag value ...]\n"
    "(see the comment at the top of bench/distrun_bench.cc, and bench/RESULTS.md)\n";

int Dispatch(const std::string& which, int argc, char** argv) {
  using distrun::bench::Flags;
  const std::string default_distrun = "build/release/distrun";
  if (which == "scrape") {
    Flags f(argc, argv, 2, {"ranks", "scrapes", "agents", "seconds"});
    return distrun::bench::ScrapeBench(f);
  }
  if (which == "detect") {
    Flags f(argc, argv, 2, {"distrun", "runs"});
    int runs = static_cast<int>(f.Int("runs", 200));
    return distrun::bench::DetectStartupBench(f.Get("distrun", default_distrun), runs > 0 ? runs : 200);
  }
  if (which == "launch") {
    Flags f(argc, argv, 2, {"distrun", "runs", "nproc"});
    int runs = static_cast<int>(f.Int("runs", 200));
    int nproc = static_cast<int>(f.Int("nproc", 8));
    return distrun::bench::LaunchBench(f.Get("distrun", default_distrun), runs > 0 ? runs : 200,
                                       nproc > 0 ? nproc : 8);
  }
  if (which == "rendezvous") {
    return distrun::bench::RendezvousBench(Flags(argc, argv, 2,
                                                 {"agents", "agents-per-connection", "threads", "client",
                                                  "heartbeat-ms", "heartbeat-timeout-ms", "hold-s", "perf"}));
  }
  if (which == "coordinator") {
    return distrun::bench::CoordinatorMain(
        Flags(argc, argv, 2,
              {"nodes", "heartbeat-timeout-ms", "min-nodes", "torch-store", "torch-store-threads", "resume",
               "host-agent", "metrics-port", "in-place"}));
  }
  if (which == "elastic") {
    return distrun::bench::ElasticBench(
        Flags(argc, argv, 2, {"agents", "trials", "threads", "heartbeat-timeout-ms", "in-place"}));
  }
  if (which == "stack-merge") {
    return distrun::bench::StackMergeBench(Flags(argc, argv, 2, {"stacks", "frames", "threads"}));
  }
  if (which == "torch-store") {
    return distrun::bench::TorchStoreBench(
        Flags(argc, argv, 2,
              {"ranks", "ranks-per-connection", "threads", "torch-timeout-s", "torch-max-ranks", "servers",
               "pin", "torch-python", "torch-libuv", "store-threads"}));
  }
  if (which == "guard")
    return distrun::bench::GuardBench(
        Flags(argc, argv, 2, {"distrun", "floor", "recorded", "repeats", "as-built"}));
  if (which == "python-site")
    return distrun::bench::PythonSiteBench(Flags(argc, argv, 2, {"python", "runs"}));
  if (which == "standby") return distrun::bench::StandbyBench(Flags(argc, argv, 2, {"sets"}));
  if (which == "takeover") {
    return distrun::bench::TakeoverBench(Flags(argc, argv, 2, {"agents", "trials", "threads", "job-keys"}));
  }
  if (which == "kv") return distrun::bench::KvBench(Flags(argc, argv, 2, {"clients", "seconds", "perf"}));
  if (which == "kv-client") {
    return distrun::bench::KvClientMain(Flags(argc, argv, 2, {"address", "id", "seconds", "start-ns"}));
  }
  if (which == "agent-memory") {
    return distrun::bench::AgentMemoryBench(Flags(argc, argv, 2, {"distrun"}));
  }
  if (which == "agent") return distrun::bench::AgentMain(Flags(argc, argv, 2, {"address"}));
  if (which == "failure") {
    return distrun::bench::FailureBench(
        Flags(argc, argv, 2, {"distrun", "runs", "trials", "nproc", "workers", "srun-nodes", "lab"}));
  }
  if (which == "srun")
    return distrun::bench::SrunBench(Flags(argc, argv, 2, {"distrun", "nodes", "runs", "lab"}));
  if (which == "failure-worker") {
    return distrun::bench::FailureWorkerMain(Flags(argc, argv, 2, {"dir", "fail-rank", "nproc"}));
  }
  std::fprintf(stderr, "distrun-bench: unknown benchmark '%s'\n%s", which.c_str(), kUsage);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    return Dispatch(argv[1], argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "distrun-bench: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "distrun-bench: %s\n", e.what());
    return 1;
  }
}
