// A stand-in for the CUDA driver (libcuda.so.1), so that distrun's dlopen path is tested on machines
// without one. Test-only: its behaviour comes from variables read at each call.
//   FAKE_CUDA_DEVICES=N       number of GPUs (default 0: cuInit fails with CUDA_ERROR_NO_DEVICE, as the
//                             real driver does)
//   FAKE_CUDA_INIT_ERROR=N    cuInit returns N
//   FAKE_CUDA_COUNT_ERROR=N   cuDeviceGetCount returns N
//   FAKE_CUDA_PCI_BUS_IDS=A,B device i is on PCI bus the i-th entry (as the driver prints it, e.g.
//                             "0000:3B:00.0"); devices without an entry keep the default below. Tests point
//                             it at real PCI devices, whose sysfs entries CPU binding reads.
// A successful cuInit starts a thread that sleeps for the life of the process, as the real driver starts
// its own: a program that calls cuInit is no longer single-threaded, whatever it assumed.
// Device i is "Fake GPU i" on PCI bus "0000:A<i>:00.0" with UUID bytes 0x10*(i+1), 0x01, 0x02 ... 0x0f.
// Built with FAKE_CUDA_NO_UUID_V2, it lacks cuDeviceGetUuid_v2 (drivers older than CUDA 11.4), and its
// cuDeviceGetUuid sets the first byte to 0xaa so that tests can tell which entry point answered.

#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value == nullptr ? fallback : std::atoi(value);
}

int DeviceCount() { return EnvInt("FAKE_CUDA_DEVICES", 0); }

void* DriverThread(void*) {
  for (;;) ::pause();
}

// Once per process, with the signal mask of the thread that called cuInit (the driver's threads do the same).
void StartDriverThread() {
  static bool started = [] {
    pthread_t thread;
    if (pthread_create(&thread, nullptr, DriverThread, nullptr) != 0) return false;
    pthread_detach(thread);
    return true;
  }();
  (void)started;
}

bool ValidDevice(int device) { return device >= 0 && device < DeviceCount(); }

struct FakeUuid {
  unsigned char bytes[16];
};

int FillUuid(FakeUuid* uuid, int device, unsigned char first) {
  if (uuid == nullptr) return 1;         // CUDA_ERROR_INVALID_VALUE
  if (!ValidDevice(device)) return 101;  // CUDA_ERROR_INVALID_DEVICE
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<unsigned char>(i);
  uuid->bytes[0] = first == 0 ? static_cast<unsigned char>(0x10 * (device + 1)) : first;
  return 0;
}

}  // namespace

extern "C" {

int cuInit(unsigned int flags) {
  if (flags != 0) return 1;
  int error = EnvInt("FAKE_CUDA_INIT_ERROR", 0);
  if (error != 0) return error;
  if (DeviceCount() == 0) return 100;  // CUDA_ERROR_NO_DEVICE
  StartDriverThread();
  return 0;
}

int cuDeviceGetCount(int* count) {
  int error = EnvInt("FAKE_CUDA_COUNT_ERROR", 0);
  if (error != 0) return error;
  *count = DeviceCount();
  return 0;
}

int cuDeviceGet(int* device, int ordinal) {
  if (!ValidDevice(ordinal)) return 101;
  *device = ordinal;
  return 0;
}

int cuDeviceGetName(char* name, int len, int device) {
  if (!ValidDevice(device)) return 101;
  std::snprintf(name, static_cast<size_t>(len), "Fake GPU %d", device);
  return 0;
}

int cuDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
  if (!ValidDevice(device)) return 101;
  if (pci_bus_id == nullptr || len <= 0) return 1;  // CUDA_ERROR_INVALID_VALUE
  // The device's entry in FAKE_CUDA_PCI_BUS_IDS, if it has one.
  if (const char* list = std::getenv("FAKE_CUDA_PCI_BUS_IDS")) {
    const char* entry = list;
    for (int i = 0; i < device && entry != nullptr; ++i) {
      entry = std::strchr(entry, ',');
      if (entry != nullptr) ++entry;
    }
    if (entry != nullptr && *entry != '\0' && *entry != ',') {
      size_t n = std::strcspn(entry, ",");
      std::snprintf(pci_bus_id, static_cast<size_t>(len), "%.*s", static_cast<int>(n), entry);
      return 0;
    }
  }
  std::snprintf(pci_bus_id, static_cast<size_t>(len), "0000:A%X:00.0", device);
  return 0;
}

int cuDeviceGetUuid(FakeUuid* uuid, int device) { return FillUuid(uuid, device, 0xaa); }

#ifndef FAKE_CUDA_NO_UUID_V2
int cuDeviceGetUuid_v2(FakeUuid* uuid, int device) { return FillUuid(uuid, device, 0); }
#endif

}  // extern "C"
