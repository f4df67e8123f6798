// The C API of recovering in place (include/distrun/client.h, distrun_recovery_*) over RecoveryClient.

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "distrun/client.h"
#include "runtime/client/recovery_client.h"

struct distrun_recovery {
  std::unique_ptr<distrun::RecoveryClient> client;
  std::string last_error;
};

namespace {

int Report(distrun_recovery* r, const distrun::Status& s) {
  if (s.ok()) return DISTRUN_OK;
  r->last_error = s.message;
  return static_cast<int>(s.code);
}

char* Copy(const std::string& text) {
  char* out = static_cast<char*>(std::malloc(text.size() + 1));
  if (out != nullptr) std::memcpy(out, text.c_str(), text.size() + 1);
  return out;
}

int* CopyInts(const std::vector<int>& v) {
  if (v.empty()) return nullptr;
  int* out = static_cast<int*>(std::malloc(v.size() * sizeof(int)));
  if (out != nullptr) std::memcpy(out, v.data(), v.size() * sizeof(int));
  return out;
}

std::chrono::milliseconds Millis(int64_t ms) { return std::chrono::milliseconds(ms < 0 ? -1 : ms); }

}  // namespace

extern "C" {

distrun_recovery* distrun_recovery_open(char* error, size_t error_len) {
  auto fail = [&](const std::string& message) -> distrun_recovery* {
    if (error != nullptr && error_len > 0) {
      std::strncpy(error, message.c_str(), error_len - 1);
      error[error_len - 1] = '\0';
    }
    return nullptr;
  };
  const char* address = std::getenv(distrun::kRecoverySocketVariable);
  if (address == nullptr || *address == '\0') {
    return fail(
        "DISTRUN_RECOVERY_SOCKET is not set: run this program as a worker of distrun --recovery in-process");
  }
  try {
    auto r = std::make_unique<distrun_recovery>();
    r->client = std::make_unique<distrun::RecoveryClient>(address);
    return r.release();
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

void distrun_recovery_close(distrun_recovery* recovery) { delete recovery; }

int distrun_recovery_fd(distrun_recovery* recovery) { return recovery ? recovery->client->fd() : -1; }

int distrun_recovery_changed(distrun_recovery* recovery) {
  if (recovery == nullptr) return -DISTRUN_INVALID_ARGUMENT;
  const int status = Report(recovery, recovery->client->Poll());
  return status == DISTRUN_OK ? recovery->client->changed() : -status;
}

int distrun_recovery_wait_change(distrun_recovery* recovery, int held, int64_t timeout_ms, int* generation) {
  if (recovery == nullptr || generation == nullptr) return DISTRUN_INVALID_ARGUMENT;
  return Report(recovery, recovery->client->WaitChange(held, Millis(timeout_ms), generation));
}

int distrun_recovery_wait_world(distrun_recovery* recovery, int min_generation, int64_t timeout_ms,
                                distrun_world* world) {
  if (recovery == nullptr || world == nullptr) return DISTRUN_INVALID_ARGUMENT;
  distrun::WorldMessage w;
  const int status = Report(recovery, recovery->client->WaitWorld(min_generation, Millis(timeout_ms), &w));
  if (status != DISTRUN_OK) return status;
  *world = distrun_world{};
  world->generation = w.generation;
  world->rank = w.rank;
  world->world_size = w.world_size;
  world->local_rank = w.local_rank;
  world->local_world_size = w.local_world_size;
  world->group_rank = w.group_rank;
  world->group_world_size = w.group_world_size;
  world->is_new = w.is_new ? 1 : 0;
  world->source = w.source;
  world->lost = CopyInts(w.lost);
  world->lost_count = w.lost.size();
  world->joined = CopyInts(w.joined);
  world->joined_count = w.joined.size();
  world->store_prefix = Copy(w.store_prefix);
  world->env = static_cast<char**>(std::calloc(w.env.size() + 1, sizeof(char*)));
  if (world->env != nullptr) {
    for (const auto& [name, value] : w.env) world->env[world->env_count++] = Copy(name + "=" + value);
  }
  return DISTRUN_OK;
}

int distrun_recovery_ready(distrun_recovery* recovery, int generation) {
  if (recovery == nullptr) return DISTRUN_INVALID_ARGUMENT;
  return Report(recovery, recovery->client->Ready(generation));
}

int distrun_recovery_up(distrun_recovery* recovery, int generation) {
  if (recovery == nullptr) return DISTRUN_INVALID_ARGUMENT;
  return Report(recovery, recovery->client->Up(generation));
}

void distrun_world_free(distrun_world* world) {
  if (world == nullptr) return;
  std::free(world->lost);
  std::free(world->joined);
  std::free(world->store_prefix);
  for (size_t i = 0; i < world->env_count; ++i) std::free(world->env[i]);
  std::free(world->env);
  *world = distrun_world{};
}

size_t distrun_recovery_last_error(distrun_recovery* recovery, char* buffer, size_t len) {
  if (recovery == nullptr) return 0;
  const std::string& e = recovery->last_error;
  if (buffer != nullptr && len > 0) {
    std::strncpy(buffer, e.c_str(), len - 1);
    buffer[len - 1] = '\0';
  }
  return e.size();
}

}  // extern "C"
