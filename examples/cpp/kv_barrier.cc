// Every worker publishes a key, waits at a barrier, then reads every other worker's key: the runtime's
// key-value store and barriers through the C API of <distrun/client.h>.
//
//   distrun --nproc-per-node 3 -- ./kv_barrier
//
// prints one line per worker, e.g. "rank 1 of 3: rank0@node1 rank1@node1 rank2@node1".
#include <distrun/client.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

namespace {

constexpr int64_t kWaitMs = 60'000;  // how long a worker waits for the others

struct ClientCloser {
  void operator()(distrun_client* c) const { distrun_client_close(c); }
};
using Client = std::unique_ptr<distrun_client, ClientCloser>;

std::string LastError(distrun_client* c) {
  char message[512];
  distrun_client_last_error(c, message, sizeof message);
  return message;
}

int Fail(distrun_client* c, const char* what) {
  std::fprintf(stderr, "kv_barrier: %s failed: %s\n", what, LastError(c).c_str());
  return 1;
}

std::string Key(int rank) { return "kv_barrier/" + std::to_string(rank); }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) {
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    std::fprintf(help ? stdout : stderr,
                 "usage: distrun [OPTIONS] -- %s\n"
                 "Each worker sets kv_barrier/<rank> to rank<rank>@<host>, waits at the barrier kv_barrier,\n"
                 "then reads every worker's key and prints them on one line. It takes no arguments: distrun\n"
                 "gives it DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN, DISTRUN_PROCESS_ID and\n"
                 "DISTRUN_NUM_PROCESSES.\n",
                 argv[0]);
    return help ? 0 : 2;
  }

  char error[512] = "";
  Client client(distrun_client_open_env(0, error, sizeof error));
  if (!client) {
    std::fprintf(stderr, "kv_barrier: %s\n", error);
    return 2;
  }
  const char* id = std::getenv("DISTRUN_PROCESS_ID");  // distrun_client_open_env checked it
  const char* count = std::getenv("DISTRUN_NUM_PROCESSES");
  const int rank = id != nullptr ? std::atoi(id) : 0;
  const int workers = count != nullptr ? std::atoi(count) : 0;
  if (workers < 1) {
    std::fprintf(stderr, "kv_barrier: DISTRUN_NUM_PROCESSES='%s' is not a worker count\n",
                 count ? count : "");
    return 2;
  }

  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const std::string mine = "rank" + std::to_string(rank) + "@" + host;
  if (distrun_kv_set(client.get(), Key(rank).c_str(), mine.data(), mine.size()) != DISTRUN_OK) {
    return Fail(client.get(), "kv set");
  }
  // 0: every worker of the job. Once through, every worker's key is set.
  if (distrun_barrier(client.get(), "kv_barrier", 0, kWaitMs) != DISTRUN_OK)
    return Fail(client.get(), "barrier");

  std::string line = "rank " + std::to_string(rank) + " of " + std::to_string(workers) + ":";
  for (int other = 0; other < workers; ++other) {
    char* value = nullptr;
    size_t length = 0;
    if (distrun_kv_get(client.get(), Key(other).c_str(), kWaitMs, &value, &length) != DISTRUN_OK) {
      return Fail(client.get(), ("kv get " + Key(other)).c_str());
    }
    line += " " + std::string(value, length);
    distrun_free(value);
  }
  std::printf("%s\n", line.c_str());
  return 0;
}
