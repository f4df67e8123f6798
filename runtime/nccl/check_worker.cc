// distrun-check-worker: what `distrun check` runs on every GPU. It joins the job's NCCL communicator
// (distrun_nccl_comm_init), sweeps an all-reduce of floats over message sizes, checks every sum, and
// worker 0 prints the bandwidth table and a verdict (runtime/nccl/check_report.h). Exit 0: passed; 1: failed;
// 2: bad options.
//
//   distrun-check-worker [--min-bytes 8] [--max-bytes 1G] [--factor 2] [--warmup 5] [--iters 20]
//                        [--min-busbw GBPS]

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "distrun/nccl.h"
#include "runtime/nccl/check_report.h"

namespace {

struct Settings {
  size_t min_bytes = 8;
  size_t max_bytes = size_t{1} << 30;
  size_t factor = 2;
  int warmup = 5;
  int iters = 20;
  double min_busbw = 0;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "distrun-check-worker: %s; options: --min-bytes SIZE --max-bytes SIZE --factor N --warmup N "
               "--iters N --min-busbw GBPS (SIZE such as 8, 64K, 1G)\n",
               problem.c_str());
  std::exit(2);
}

Settings ParseSettings(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (i + 1 >= argc) Usage("'" + std::string(flag) + "' needs a value");
    const std::string value = argv[++i];
    auto count = [&](int low) {
      char* end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (*end != '\0' || end == value.c_str() || n < low || n > 1'000'000) {
        Usage(std::string(flag) + "='" + value + "' is not a whole number of at least " +
              std::to_string(low));
      }
      return static_cast<int>(n);
    };
    auto bytes = [&] {
      std::optional<size_t> b = distrun::ParseByteSize(value);
      if (!b || *b == 0) Usage(std::string(flag) + "='" + value + "' is not a size such as 8, 64K or 1G");
      return *b;
    };
    if (flag == "--min-bytes") {
      s.min_bytes = bytes();
    } else if (flag == "--max-bytes") {
      s.max_bytes = bytes();
    } else if (flag == "--factor") {
      s.factor = static_cast<size_t>(count(2));
    } else if (flag == "--warmup") {
      s.warmup = count(0);
    } else if (flag == "--iters") {
      s.iters = count(1);
    } else if (flag == "--min-busbw") {
      char* end = nullptr;
      s.min_busbw = std::strtod(value.c_str(), &end);
      if (*end != '\0' || end == value.c_str() || !(s.min_busbw >= 0)) {
        Usage("--min-busbw='" + value + "' is not a bandwidth in GB/s such as 100");
      }
    } else {
      Usage("unknown option '" + std::string(flag) + "'");
    }
  }
  if (s.max_bytes < s.min_bytes) Usage("--max-bytes is below --min-bytes");
  return s;
}

// Stops the worker with one line; distrun then stops the others and reports this one as the root cause.
[[noreturn]] void Fail(int rank, const std::string& what) {
  std::fprintf(stderr, "distrun-check-worker: rank %d: %s\n", rank, what.c_str());
  std::exit(1);
}

void CheckCuda(int rank, cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(rank, std::string(what) + ": " + cudaGetErrorString(e));
}

void CheckNccl(int rank, ncclResult_t r, const char* what) {
  if (r != ncclSuccess)
    Fail(rank, std::string(what) + ": " + ncclGetErrorString(r) + " (NCCL_DEBUG=WARN says more)");
}

// Device memory released on every path.
struct DeviceBuffer {
  void* ptr = nullptr;
  DeviceBuffer(int rank, size_t bytes) { CheckCuda(rank, cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

}  // namespace

int main(int argc, char** argv) {
  const Settings settings = ParseSettings(argc, argv);
  ncclComm_t comm = nullptr;
  if (distrun_nccl_comm_init(&comm) != ncclSuccess) return 1;
  int rank = 0, nranks = 1;
  CheckNccl(rank, ncclCommUserRank(comm, &rank), "ncclCommUserRank");
  CheckNccl(rank, ncclCommCount(comm, &nranks), "ncclCommCount");
  cudaStream_t stream = nullptr;
  CheckCuda(rank, cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaEvent_t start = nullptr, stop = nullptr;
  CheckCuda(rank, cudaEventCreate(&start), "cudaEventCreate");
  CheckCuda(rank, cudaEventCreate(&stop), "cudaEventCreate");

  const std::vector<size_t> sizes =
      distrun::MessageSizes(settings.min_bytes, settings.max_bytes, settings.factor, sizeof(float));
  if (sizes.empty()) Fail(rank, "no message size between --min-bytes and --max-bytes");
  const size_t max_bytes = sizes.back();
  DeviceBuffer send(rank, max_bytes), recv(rank, max_bytes), stats(rank, 2 * sizeof(double));

  // Every rank sends rank+1: each element of the sum is n(n+1)/2, exact in float for any real job size.
  {
    std::vector<float> chunk(std::min<size_t>(max_bytes, size_t{4} << 20) / sizeof(float),
                             static_cast<float>(rank + 1));
    const size_t chunk_bytes = chunk.size() * sizeof(float);
    for (size_t offset = 0; offset < max_bytes; offset += chunk_bytes) {
      CheckCuda(rank,
                cudaMemcpy(static_cast<char*>(send.ptr) + offset, chunk.data(),
                           std::min(chunk_bytes, max_bytes - offset), cudaMemcpyHostToDevice),
                "cudaMemcpy");
    }
  }
  const float expected = static_cast<float>(nranks) * static_cast<float>(nranks + 1) / 2.0f;

  std::vector<distrun::AllReduceResult> results;
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    // All bits set is a NaN: an element the all-reduce never wrote cannot pass for a sum.
    CheckCuda(rank, cudaMemsetAsync(recv.ptr, 0xff, bytes, stream), "cudaMemsetAsync");
    for (int i = 0; i < settings.warmup; ++i) {
      CheckNccl(rank, ncclAllReduce(send.ptr, recv.ptr, count, ncclFloat, ncclSum, comm, stream),
                "ncclAllReduce");
    }
    CheckCuda(rank, cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    CheckCuda(rank, cudaEventRecord(start, stream), "cudaEventRecord");
    for (int i = 0; i < settings.iters; ++i) {
      CheckNccl(rank, ncclAllReduce(send.ptr, recv.ptr, count, ncclFloat, ncclSum, comm, stream),
                "ncclAllReduce");
    }
    CheckCuda(rank, cudaEventRecord(stop, stream), "cudaEventRecord");
    CheckCuda(rank, cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    CheckCuda(rank, cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");

    // The sum at the two ends of the buffer (up to 256 elements each).
    const size_t probe = std::min<size_t>(count, 256);
    std::vector<float> head(probe), tail(probe);
    CheckCuda(rank, cudaMemcpy(head.data(), recv.ptr, probe * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    CheckCuda(rank,
              cudaMemcpy(tail.data(), static_cast<const float*>(recv.ptr) + (count - probe),
                         probe * sizeof(float), cudaMemcpyDeviceToHost),
              "cudaMemcpy");
    bool wrong = false;
    for (size_t i = 0; i < probe; ++i) wrong = wrong || head[i] != expected || tail[i] != expected;

    // The slowest rank's time and whether any rank saw a wrong sum, known to all.
    double local[2] = {static_cast<double>(ms) / 1e3 / settings.iters, wrong ? 1.0 : 0.0};
    CheckCuda(rank, cudaMemcpy(stats.ptr, local, sizeof local, cudaMemcpyHostToDevice), "cudaMemcpy");
    CheckNccl(rank, ncclAllReduce(stats.ptr, stats.ptr, 2, ncclDouble, ncclMax, comm, stream),
              "ncclAllReduce");
    CheckCuda(rank, cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    double global[2] = {0, 0};
    CheckCuda(rank, cudaMemcpy(global, stats.ptr, sizeof global, cudaMemcpyDeviceToHost), "cudaMemcpy");
    results.push_back({bytes, global[0], global[1] == 0.0});
  }

  const bool passed = distrun::CheckPassed(results, nranks, settings.min_busbw);
  if (rank == 0) {
    std::printf(
        "check: NCCL %d.%d.%d all-reduce (float, sum) across %d GPU%s; %d warm-up and %d timed "
        "iterations per size\n",
        NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, nranks, nranks == 1 ? "" : "s", settings.warmup, settings.iters);
    std::fputs(distrun::FormatCheckTable(results, nranks).c_str(), stdout);
    std::puts(distrun::CheckVerdict(results, nranks, settings.min_busbw).c_str());
    std::fflush(stdout);
  }
  ncclCommDestroy(comm);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return passed ? 0 : 1;
}
