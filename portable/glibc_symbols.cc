// glibc's names for what older_glibc.h implements, linked into the wheel's programs and libraries only
// (cmake/wheel.cmake), which are linked against glibc 2.31's libraries (Debian 11's libc6-dev) and must not
// need a symbol version newer than 2.28. The code that calls these names was compiled against glibc 2.36:
// GCC 12's static libstdc++ and libgcc_eh, and Debian 12's static gRPC, protobuf and abseil. A definition
// here binds those calls at link time; nothing is exported (compiled with hidden visibility, and the shared
// objects' version scripts export the C API alone). Never linked into the Debian build, whose glibc has all.
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#include "portable/older_glibc.h"

extern "C" {

// glibc 2.32: libstdc++ skips atomic reference counts while this is non-zero. Zero is always correct: the
// process is treated as multi-threaded.
char __libc_single_threaded = 0;

// glibc 2.35: GCC 12's unwinder finds a frame's unwind tables with it. Only what the unwinder reads is
// filled; dlfo_link_map stays null.
int _dl_find_object(void* pc, dl_find_object* result) noexcept {
  distrun::portable::LoadedObject object;
  if (!distrun::portable::FindLoadedObject(pc, &object)) return -1;
  *result = dl_find_object{};
  result->dlfo_map_start = const_cast<void*>(object.map_start);
  result->dlfo_map_end = const_cast<void*>(object.map_end);
  result->dlfo_eh_frame = const_cast<void*>(object.eh_frame);
  return 0;
}

// glibc 2.36: libstdc++'s std::random_device reads these.
uint32_t arc4random() noexcept {
  uint32_t value;
  distrun::portable::FillRandom(&value, sizeof value);
  return value;
}
void arc4random_buf(void* buffer, size_t size) noexcept { distrun::portable::FillRandom(buffer, size); }
uint32_t arc4random_uniform(uint32_t upper) noexcept { return distrun::portable::UniformRandom(upper); }

// glibc 2.30: libstdc++'s waits on std::chrono::steady_clock.
int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                           const struct timespec* deadline) {
  return distrun::portable::ClockWait(cond, mutex, clock, deadline);
}

}  // extern "C"
