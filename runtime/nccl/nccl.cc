// The NCCL helper of <distrun/nccl.h>: the id exchange is runtime/nccl/bootstrap.h; here CUDA and NCCL.

#include "distrun/nccl.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "distrun/client.h"
#include "runtime/nccl/bootstrap.h"

namespace {

constexpr int64_t kDefaultTimeoutMs = 300'000;

struct ClientCloser {
  void operator()(distrun_client* c) const { distrun_client_close(c); }
};

void CopyError(const std::string& message, char* error, size_t error_len) {
  if (error == nullptr || error_len == 0) return;
  std::strncpy(error, message.c_str(), error_len - 1);
  error[error_len - 1] = '\0';
}

ncclResult_t InitNamed(ncclComm_t* comm, const char* name, int64_t timeout_ms, std::string* error) {
  using distrun::nccl::WorkerSettings;
  if (comm == nullptr) {
    *error = "distrun_nccl_comm_init needs a place for the communicator";
    return ncclInvalidArgument;
  }
  const std::string comm_name = name != nullptr ? name : "default";
  if (!distrun::nccl::ValidCommName(comm_name)) {
    *error =
        "communicator name '" + comm_name + "' is not usable; use 1 to 64 letters, digits, '-', '_', '.'";
    return ncclInvalidArgument;
  }
  std::optional<WorkerSettings> s = distrun::nccl::ReadWorkerSettings(std::getenv, error);
  if (!s) return ncclInvalidUsage;

  // The device first: NCCL binds the communicator to the current one.
  int count = 0;
  if (cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess || count == 0) {
    *error = std::string("no CUDA device for worker ") + std::to_string(s->rank) + ": " +
             (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount found none") +
             " (CUDA_VISIBLE_DEVICES, the driver)";
    return ncclUnhandledCudaError;
  }
  const int device = distrun::nccl::LocalDevice(*s, count);
  if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess) {
    *error = "worker " + std::to_string(s->rank) + " cannot use CUDA device " + std::to_string(device) +
             " of " + std::to_string(count) + " (DISTRUN_LOCAL_DEVICE_IDS): " + cudaGetErrorString(e);
    return ncclUnhandledCudaError;
  }

  char open_error[512] = {};
  std::unique_ptr<distrun_client, ClientCloser> client(
      distrun_client_open_env(0, open_error, sizeof open_error));
  if (!client) {
    *error = open_error;
    return ncclInvalidUsage;
  }
  ncclUniqueId id{};
  std::string bytes;
  if (s->rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess) {
      *error = std::string("ncclGetUniqueId: ") + ncclGetErrorString(r);
      return r;
    }
    bytes.assign(id.internal, sizeof id.internal);
  }
  const std::string key = distrun::nccl::UniqueIdKey(*s, comm_name);
  int rc = distrun::nccl::ShareUniqueId(client.get(), key, s->rank, sizeof id.internal,
                                        timeout_ms > 0 ? timeout_ms : kDefaultTimeoutMs, &bytes, error);
  if (rc != DISTRUN_OK) return rc == DISTRUN_ALREADY_EXISTS ? ncclInvalidUsage : ncclSystemError;
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);

  if (ncclResult_t r = ncclCommInitRank(comm, s->nranks, id, s->rank); r != ncclSuccess) {
    *error = "ncclCommInitRank (rank " + std::to_string(s->rank) + " of " + std::to_string(s->nranks) +
             ", CUDA device " + std::to_string(device) + "): " + ncclGetErrorString(r) +
             "; NCCL_DEBUG=WARN says more";
    return r;
  }
  return ncclSuccess;
}

}  // namespace

extern "C" {

ncclResult_t distrun_nccl_comm_init_named(ncclComm_t* comm, const char* name, int64_t timeout_ms, char* error,
                                          size_t error_len) {
  std::string message;
  ncclResult_t r = ncclInternalError;
  try {
    r = InitNamed(comm, name, timeout_ms, &message);
  } catch (const std::exception& e) {  // exceptions must not cross into C
    message = e.what();
  }
  if (r != ncclSuccess) CopyError(message, error, error_len);
  return r;
}

ncclResult_t distrun_nccl_comm_init(ncclComm_t* comm) {
  char error[1024] = {};
  ncclResult_t r = distrun_nccl_comm_init_named(comm, "default", 0, error, sizeof error);
  if (r != ncclSuccess) std::fprintf(stderr, "distrun: nccl: %s\n", error);
  return r;
}

}  // extern "C"
