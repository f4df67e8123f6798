#pragma once
// The NCCL helper's steps that need neither CUDA nor NCCL (runtime/nccl/nccl.cc does the rest): reading
// the worker's variables, naming the key, handing worker 0's unique id to the others through the job's
// key-value store, and choosing the GPU. Header-only, so the unit tests (built without the toolkit) and
// the helper share it.

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "distrun/client.h"

namespace distrun::nccl {

// What the helper reads from the variables distrun sets for each worker.
struct WorkerSettings {
  int rank = 0;
  int nranks = 1;
  int local_rank = 0;
  std::vector<int> local_device_ids;  // DISTRUN_LOCAL_DEVICE_IDS; empty when distrun knew of no GPU
  std::string run_id;
  int restart_count = 0;
};

// `value` (NAME's value, or nullptr when unset) as a count 0..2^30; nullopt with `error` set otherwise.
inline std::optional<int> ReadCount(const char* name, const char* value, bool required, std::string* error) {
  if (value == nullptr || *value == '\0') {
    if (!required) return 0;
    *error = std::string(name) + " is not set; run this program as a worker of distrun (distrun -- PROGRAM)";
    return std::nullopt;
  }
  char* end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (*end != '\0' || end == value || n < 0 || n > (1L << 30)) {
    *error =
        std::string(name) + "='" + value + "' is not a count (0, 1, ...); distrun sets it for each worker";
    return std::nullopt;
  }
  return static_cast<int>(n);
}

// `get` returns a variable's value or nullptr (std::getenv in the helper, a map in tests).
inline std::optional<WorkerSettings> ReadWorkerSettings(const std::function<const char*(const char*)>& get,
                                                        std::string* error) {
  WorkerSettings s;
  auto rank = ReadCount("DISTRUN_PROCESS_ID", get("DISTRUN_PROCESS_ID"), true, error);
  auto nranks =
      rank ? ReadCount("DISTRUN_NUM_PROCESSES", get("DISTRUN_NUM_PROCESSES"), true, error) : std::nullopt;
  auto local =
      nranks ? ReadCount("DISTRUN_LOCAL_RANK", get("DISTRUN_LOCAL_RANK"), false, error) : std::nullopt;
  auto restart =
      local ? ReadCount("DISTRUN_RESTART_COUNT", get("DISTRUN_RESTART_COUNT"), false, error) : std::nullopt;
  if (!restart) return std::nullopt;
  if (*nranks < 1 || *rank >= *nranks) {
    *error = "DISTRUN_PROCESS_ID=" + std::to_string(*rank) +
             " is not below DISTRUN_NUM_PROCESSES=" + std::to_string(*nranks) +
             "; distrun sets both for each worker";
    return std::nullopt;
  }
  s.rank = *rank;
  s.nranks = *nranks;
  s.local_rank = *local;
  s.restart_count = *restart;
  if (const char* run = get("DISTRUN_RUN_ID")) s.run_id = run;
  if (const char* ids = get("DISTRUN_LOCAL_DEVICE_IDS"); ids != nullptr && *ids != '\0') {
    std::string_view rest(ids);
    while (!rest.empty()) {
      size_t comma = rest.find(',');
      std::string field(rest.substr(0, comma));
      auto id = ReadCount("DISTRUN_LOCAL_DEVICE_IDS", field.c_str(), true, error);
      if (!id) {
        *error =
            std::string("DISTRUN_LOCAL_DEVICE_IDS='") + ids + "' is not a list of device ids such as 0,1";
        return std::nullopt;
      }
      s.local_device_ids.push_back(*id);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
  }
  return s;
}

// Communicator names become part of a key: keep them to a plain alphabet.
inline bool ValidCommName(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

// One key per communicator and run: a restarted job (DISTRUN_RESTART_COUNT + 1) never reads the id of the
// attempt before, whose workers are gone.
inline std::string UniqueIdKey(const WorkerSettings& s, std::string_view name) {
  return "distrun/nccl/" + (s.run_id.empty() ? std::string("run") : s.run_id) + "/" +
         std::to_string(s.restart_count) + "/" + std::string(name);
}

// The CUDA device (among those the worker sees) its rank uses.
inline int LocalDevice(const WorkerSettings& s, int device_count) {
  if (!s.local_device_ids.empty()) return s.local_device_ids.front();
  return device_count > 0 ? s.local_rank % device_count : 0;
}

// Worker 0 publishes `*id` under `key` (only if the key is new: a reused name would hand two communicators
// one id); the others wait up to timeout_ms for it and receive it in `*id`, which must then be
// `expected_size` bytes. Returns 0 or a distrun_status, with `error` naming the key.
inline int ShareUniqueId(distrun_client* client, const std::string& key, int rank, size_t expected_size,
                         int64_t timeout_ms, std::string* id, std::string* error) {
  auto last_error = [client] {
    char buf[512];
    distrun_client_last_error(client, buf, sizeof buf);
    return std::string(buf);
  };
  if (rank == 0) {
    int swapped = 0;
    int rc = distrun_kv_cas(client, key.c_str(), nullptr, 0, id->data(), id->size(), &swapped);
    if (rc != DISTRUN_OK) {
      *error = "cannot store the NCCL id under '" + key + "': " + last_error();
      return rc;
    }
    if (!swapped) {
      *error = "'" + key +
               "' already holds an NCCL id: this communicator name was used before in this run; "
               "give each communicator its own name (distrun_nccl_comm_init_named)";
      return DISTRUN_ALREADY_EXISTS;
    }
    return DISTRUN_OK;
  }
  char* value = nullptr;
  size_t len = 0;
  int rc = distrun_kv_get(client, key.c_str(), timeout_ms, &value, &len);
  if (rc != DISTRUN_OK) {
    *error = (rc == DISTRUN_DEADLINE_EXCEEDED ? "worker 0 did not publish the NCCL id under '" + key +
                                                    "' within " + std::to_string(timeout_ms / 1000) + " s: "
                                              : "cannot read the NCCL id under '" + key + "': ") +
             last_error();
    return rc;
  }
  id->assign(value, len);
  distrun_free(value);
  if (id->size() != expected_size) {
    *error = "'" + key + "' holds " + std::to_string(id->size()) + " bytes, not an NCCL id of " +
             std::to_string(expected_size) + "; another program wrote that key";
    return DISTRUN_FAILED_PRECONDITION;
  }
  return DISTRUN_OK;
}

}  // namespace distrun::nccl
