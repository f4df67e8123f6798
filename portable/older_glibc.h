#pragma once
// What the wheel's programs and libraries need of glibc 2.29-2.36 where only 2.28 may be present
// (scripts/make_wheel.py refuses any newer symbol version). distrun's own code calls none of these: they are
// needed by code that is compiled already, GCC 12's static libstdc++ and libgcc_eh and Debian 12's static
// gRPC, protobuf and abseil, which were built against glibc 2.36. glibc_symbols.cc gives them the glibc
// names, in the wheel's link only (cmake/wheel.cmake); here they are plain functions, tested everywhere.

#include <pthread.h>
#include <time.h>

#include <cstddef>
#include <cstdint>

namespace distrun::portable {

// Where the loaded object that holds `pc` is mapped and where its PT_GNU_EH_FRAME segment lies: what GCC's
// unwinder asks glibc 2.35's _dl_find_object for at every frame of a thrown exception. False when no loaded
// object maps `pc`.
struct LoadedObject {
  const void* map_start = nullptr;
  const void* map_end = nullptr;
  const void* eh_frame = nullptr;  // null when the object has no PT_GNU_EH_FRAME
};
bool FindLoadedObject(const void* pc, LoadedObject* out);

// `size` bytes from the kernel's random source (getrandom, else /dev/urandom), as glibc 2.36's arc4random_buf
// gives them; it aborts, as glibc's does, when neither gives any.
void FillRandom(void* buffer, size_t size);
// A uniform value below `upper` (0 for 0 and 1), without modulo bias: arc4random_uniform.
uint32_t UniformRandom(uint32_t upper);

// pthread_cond_clockwait (glibc 2.30) over pthread_cond_timedwait, which waits on the condition variable's
// own clock (CLOCK_REALTIME for libstdc++'s): a CLOCK_MONOTONIC deadline becomes the realtime instant as far
// ahead. Callers (std::condition_variable) compare their clock after waking, as with any spurious wake-up.
// EINVAL for other clocks.
int ClockWait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline);

}  // namespace distrun::portable
