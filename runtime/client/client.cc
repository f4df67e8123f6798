#include "runtime/client/client.h"

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <string_view>

#include "detect/errors.h"
#include "distrun/client.h"
#include "runtime/progress/progress_board.h"

namespace distrun {

GrpcClientConfig Client::Config(const ClientOptions& options, ClientAuth* auth) {
  if (options.coordinator_address.empty()) {
    throw UsageError(
        "no coordinator address; workers started by distrun find it in DISTRUN_COORDINATOR_ADDRESS");
  }
  if (options.process_id < 0) {
    throw UsageError("process id " + std::to_string(options.process_id) +
                     " is negative; workers started by distrun find theirs in DISTRUN_PROCESS_ID");
  }
  GrpcClientConfig c;
  c.address = options.coordinator_address;
  c.call_timeout = options.call_timeout;
  c.epoch = options.epoch;
  *auth = SetClientAuth(options.token, options.munge_socket, &c);
  return c;
}

Client::Client(ClientOptions options) : options_(std::move(options)), grpc_(Config(options_, &auth_)) {}

Status Client::Said(Status s) const {
  if (s.code != StatusCode::kUnauthenticated) return s;
  if (!options_.token.empty()) {
    s.message += " (DISTRUN_TOKEN, or the Client's token, must be the job's)";
  } else {
    // Without a token, as the command-line verbs say it: what was presented (munge) and what to do.
    s.message = RefusalMessage(auth_, options_.coordinator_address, s.message);
  }
  return s;
}

}  // namespace distrun

// ---- C API ----

struct distrun_client {
  explicit distrun_client(distrun::ClientOptions options) : client(std::move(options)) {}
  distrun::Client client;
  std::mutex mu;
  std::string last_error;
};

namespace {

int Report(distrun_client* c, const distrun::Status& s) {
  if (!s.ok()) {
    std::lock_guard lock(c->mu);
    c->last_error = s.message;
  }
  return static_cast<int>(s.code);
}

int BadArgument(distrun_client* c, const char* what) {
  return Report(c, {distrun::StatusCode::kInvalidArgument, what});
}

// A malloc'ed, NUL-terminated copy (callers free it with distrun_free, from any language).
char* Copy(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

std::string Bytes(const void* data, size_t len) {
  return len == 0 ? std::string() : std::string(static_cast<const char*>(data), len);
}

// Exceptions must not cross into C.
template <typename F>
int Guard(distrun_client* c, F&& body) {
  if (c == nullptr) return static_cast<int>(distrun::StatusCode::kInvalidArgument);
  try {
    return body();
  } catch (const std::exception& e) {
    return Report(c, {distrun::StatusCode::kResourceExhausted, e.what()});
  }
}

}  // namespace

namespace {

// Puts `message` into the caller's error buffer, cut to fit; returns no client.
distrun_client* OpenFailed(const std::string& message, char* error, size_t error_len) {
  if (error != nullptr && error_len > 0) {
    std::strncpy(error, message.c_str(), error_len - 1);
    error[error_len - 1] = '\0';
  }
  return nullptr;
}

distrun_client* Open(distrun::ClientOptions o, int64_t call_timeout_ms, char* error, size_t error_len) {
  try {
    if (call_timeout_ms > 0) o.call_timeout = std::chrono::milliseconds(call_timeout_ms);
    return new distrun_client(std::move(o));
  } catch (const std::exception& e) {
    return OpenFailed(e.what(), error, error_len);
  }
}

// A variable holding 0, 1, ...: its value, -1 when unset or empty, or nullopt when it holds anything else.
std::optional<int> NumberVariable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  long n = std::strtol(text, &end, 10);
  if (*end != '\0' || n < 0 || n > 1 << 30) return std::nullopt;
  return static_cast<int>(n);
}

}  // namespace

// Helpers above have C++ linkage: they return C++ types, which C linkage cannot.
extern "C" {

distrun_client* distrun_client_open(const char* coordinator_address, const char* token, int process_id,
                                    int64_t call_timeout_ms, char* error, size_t error_len) {
  distrun::ClientOptions o;
  o.coordinator_address = coordinator_address ? coordinator_address : "";
  o.token = token ? token : "";
  o.process_id = process_id;
  if (o.token.empty()) {
    // Outside the job: the user's munge credential, from munged where `distrun status` would ask it.
    auto get = [](const char* name) {
      const char* v = std::getenv(name);
      return std::string(v ? v : "");
    };
    o.munge_socket =
        distrun::ChooseMungeSocket(get("DISTRUN_MUNGE_SOCKET"), "DISTRUN_MUNGE_SOCKET", get("SLURM_CONF"));
  }
  return Open(std::move(o), call_timeout_ms, error, error_len);
}

distrun_client* distrun_client_open_env(int64_t call_timeout_ms, char* error, size_t error_len) {
  auto fail = [&](const std::string& message) { return OpenFailed(message, error, error_len); };
  const char* address = std::getenv("DISTRUN_COORDINATOR_ADDRESS");
  if (address == nullptr || *address == '\0') {
    return fail("DISTRUN_COORDINATOR_ADDRESS is not set; run this program as a worker of distrun");
  }
  const char* token = std::getenv("DISTRUN_TOKEN");
  std::optional<int> id = NumberVariable("DISTRUN_PROCESS_ID");
  if (!id) {
    return fail(std::string("DISTRUN_PROCESS_ID='") + std::getenv("DISTRUN_PROCESS_ID") +
                "' is not a process id (0, 1, ...)");
  }
  std::optional<int> epoch = NumberVariable("DISTRUN_EPOCH");
  if (!epoch) {
    return fail(std::string("DISTRUN_EPOCH='") + std::getenv("DISTRUN_EPOCH") +
                "' is not an epoch (0, 1, ...)");
  }
  distrun::ClientOptions o;
  o.coordinator_address = address;
  o.token = token ? token : "";
  o.process_id = std::max(*id, 0);
  o.epoch = *epoch;
  return Open(std::move(o), call_timeout_ms, error, error_len);
}

void distrun_client_close(distrun_client* client) { delete client; }

size_t distrun_client_last_error(distrun_client* client, char* buffer, size_t len) {
  if (client == nullptr) return 0;
  std::lock_guard lock(client->mu);
  if (buffer != nullptr && len > 0) {
    size_t n = std::min(len - 1, client->last_error.size());
    std::memcpy(buffer, client->last_error.data(), n);
    buffer[n] = '\0';
  }
  return client->last_error.size();
}

int distrun_kv_set(distrun_client* c, const char* key, const void* value, size_t value_len) {
  return Guard(c, [&] {
    if (!key || (!value && value_len)) return BadArgument(c, "kv_set needs a key and a value");
    return Report(c, c->client.Set(key, Bytes(value, value_len)));
  });
}

int distrun_kv_get(distrun_client* c, const char* key, int64_t timeout_ms, char** value, size_t* value_len) {
  return Guard(c, [&] {
    if (!key || !value || !value_len) return BadArgument(c, "kv_get needs a key and places for the value");
    std::string v;
    int rc = Report(c, c->client.Get(key, std::chrono::milliseconds(timeout_ms), &v));
    *value = rc == 0 ? Copy(v) : nullptr;
    *value_len = rc == 0 ? v.size() : 0;
    return rc;
  });
}

int distrun_kv_try_get(distrun_client* c, const char* key, int* found, char** value, size_t* value_len) {
  return Guard(c, [&] {
    if (!key || !found || !value || !value_len)
      return BadArgument(c, "kv_try_get needs a key and out places");
    std::optional<std::string> v;
    int rc = Report(c, c->client.TryGet(key, &v));
    *found = v.has_value();
    *value = v ? Copy(*v) : nullptr;
    *value_len = v ? v->size() : 0;
    return rc;
  });
}

int distrun_kv_add(distrun_client* c, const char* key, int64_t delta, int64_t* result) {
  return Guard(c, [&] {
    if (!key || !result) return BadArgument(c, "kv_add needs a key and a place for the result");
    return Report(c, c->client.Add(key, delta, result));
  });
}

int distrun_kv_cas(distrun_client* c, const char* key, const void* expected, size_t expected_len,
                   const void* desired, size_t desired_len, int* swapped) {
  return Guard(c, [&] {
    if (!key || !swapped || (!desired && desired_len))
      return BadArgument(c, "kv_cas needs a key and out places");
    std::optional<std::string> want;
    if (expected) want = Bytes(expected, expected_len);
    distrun::CasResult r;
    int rc = Report(c, c->client.CompareAndSet(key, want, Bytes(desired, desired_len), &r));
    *swapped = r.swapped;
    return rc;
  });
}

int distrun_kv_del(distrun_client* c, const char* key, int* deleted) {
  return Guard(c, [&] {
    if (!key || !deleted) return BadArgument(c, "kv_del needs a key and a place for the result");
    bool d = false;
    int rc = Report(c, c->client.Delete(key, &d));
    *deleted = d;
    return rc;
  });
}

int distrun_kv_list(distrun_client* c, const char* prefix, distrun_kv_entry** entries, size_t* count) {
  return Guard(c, [&] {
    if (!prefix || !entries || !count) return BadArgument(c, "kv_list needs a prefix and out places");
    std::vector<std::pair<std::string, std::string>> list;
    int rc = Report(c, c->client.List(prefix, &list));
    *entries = nullptr;
    *count = 0;
    if (rc != 0 || list.empty()) return rc;
    auto* out = static_cast<distrun_kv_entry*>(std::calloc(list.size(), sizeof(distrun_kv_entry)));
    if (out == nullptr) throw std::bad_alloc();
    for (size_t i = 0; i < list.size(); ++i) {
      out[i].key = Copy(list[i].first);
      out[i].value = Copy(list[i].second);
      out[i].value_len = list[i].second.size();
    }
    *entries = out;
    *count = list.size();
    return rc;
  });
}

void distrun_kv_list_free(distrun_kv_entry* entries, size_t count) {
  for (size_t i = 0; entries != nullptr && i < count; ++i) {
    std::free(entries[i].key);
    std::free(entries[i].value);
  }
  std::free(entries);
}

int distrun_barrier(distrun_client* c, const char* name, int count, int64_t timeout_ms) {
  return Guard(c, [&] {
    if (!name) return BadArgument(c, "barrier needs a name");
    return Report(c, c->client.Barrier(name, count, std::chrono::milliseconds(timeout_ms)));
  });
}

void distrun_free(void* buffer) { std::free(buffer); }

}  // extern "C"

namespace {

// The board is one per worker process by nature (distrun gives each process a slot), so it is opened once
// and kept for the life of the process: a report must not pay for an open or a lookup.

// This worker's slot of the board, mapped on first use. Never freed: a worker's last report may come from
// a thread still running while the process exits.
struct BoardSlot {
  std::optional<distrun::ProgressBoard> board;
  int slot = -1;
  std::mutex names_mu;  // naming a section (once per name)
  std::map<std::string, int, std::less<>> names;
};

BoardSlot& MyBoardSlot() {
  static BoardSlot* const mine = [] {
    auto* s = new BoardSlot;
    const char* path = std::getenv(distrun::kProgressFileVariable);
    std::optional<int> slot = NumberVariable(distrun::kProgressSlotVariable);
    if (path == nullptr || *path == '\0' || !slot || *slot < 0) return s;
    std::string error;
    s->board = distrun::ProgressBoard::Open(path, *slot, &error);
    s->slot = *slot;
    return s;
  }();
  return *mine;
}

int64_t MonotonicNow() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

// This thread's open runs, innermost last.
struct OpenRuns {
  static constexpr int kDepth = 16;
  int index[kDepth];
  int64_t start_ns[kDepth];
  int depth = 0;
};
thread_local OpenRuns open_runs;

}  // namespace

extern "C" {

int distrun_progress(int64_t step) {
  BoardSlot& mine = MyBoardSlot();
  if (!mine.board) return DISTRUN_FAILED_PRECONDITION;
  mine.board->Report(mine.slot, step);
  return DISTRUN_OK;
}

int distrun_section_enter(const char* name) {
  BoardSlot& mine = MyBoardSlot();
  if (!mine.board) return DISTRUN_FAILED_PRECONDITION;
  if (name == nullptr || *name == '\0' || open_runs.depth == OpenRuns::kDepth)
    return DISTRUN_INVALID_ARGUMENT;
  int index = -1;
  {
    std::lock_guard lock(mine.names_mu);
    auto it = mine.names.find(std::string_view(name));
    if (it != mine.names.end()) {
      index = it->second;
    } else {
      index = mine.board->SectionIndex(mine.slot, name);
      if (index < 0) return DISTRUN_INVALID_ARGUMENT;
      mine.names.emplace(name, index);
    }
  }
  open_runs.index[open_runs.depth] = index;
  open_runs.start_ns[open_runs.depth] = MonotonicNow();
  ++open_runs.depth;
  return DISTRUN_OK;
}

int distrun_section_exit(void) {
  const int64_t now = MonotonicNow();
  BoardSlot& mine = MyBoardSlot();
  if (!mine.board) return DISTRUN_FAILED_PRECONDITION;
  if (open_runs.depth == 0) return DISTRUN_INVALID_ARGUMENT;
  --open_runs.depth;
  mine.board->RecordSection(mine.slot, open_runs.index[open_runs.depth],
                            now - open_runs.start_ns[open_runs.depth]);
  return DISTRUN_OK;
}

}  // extern "C"
