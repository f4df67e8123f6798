#include "portable/older_glibc.h"

#include <fcntl.h>
#include <link.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace distrun::portable {
namespace {

struct Search {
  uintptr_t pc;
  LoadedObject* out;
};

int VisitObject(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* search = static_cast<Search*>(data);
  uintptr_t low = UINTPTR_MAX;
  uintptr_t high = 0;
  uintptr_t eh_frame = 0;
  bool holds_pc = false;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + segment.p_vaddr;
    if (segment.p_type == PT_LOAD) {
      uintptr_t end = start + segment.p_memsz;
      if (start < low) low = start;
      if (end > high) high = end;
      if (search->pc >= start && search->pc < end) holds_pc = true;
    } else if (segment.p_type == PT_GNU_EH_FRAME) {
      eh_frame = start;
    }
  }
  if (!holds_pc) return 0;
  search->out->map_start = reinterpret_cast<const void*>(low);
  search->out->map_end = reinterpret_cast<const void*>(high);
  search->out->eh_frame = reinterpret_cast<const void*>(eh_frame);
  return 1;
}

// Writes a message without allocating (this may run where the heap is not usable) and aborts.
[[noreturn]] void Fatal(const char* message) {
  ssize_t ignored = ::write(STDERR_FILENO, message, std::strlen(message));
  (void)ignored;
  std::abort();
}

bool ReadUrandom(unsigned char* bytes, size_t size) {
  int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::read(fd, bytes + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  return got == size;
}

}  // namespace

bool FindLoadedObject(const void* pc, LoadedObject* out) {
  Search search{reinterpret_cast<uintptr_t>(pc), out};
  return ::dl_iterate_phdr(VisitObject, &search) != 0;
}

void FillRandom(void* buffer, size_t size) {
  auto* bytes = static_cast<unsigned char*>(buffer);
  int saved = errno;  // arc4random leaves errno as it was
  size_t got = 0;
  while (got < size) {
    ssize_t n = ::getrandom(bytes + got, size - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      // A kernel before 3.17 or a sandbox that forbids the call.
      if (!ReadUrandom(bytes + got, size - got))
        Fatal("distrun: no random bytes (getrandom, /dev/urandom)\n");
      break;
    }
    got += static_cast<size_t>(n);
  }
  errno = saved;
}

uint32_t UniformRandom(uint32_t upper) {
  if (upper < 2) return 0;
  // Values below 2^32 mod upper would make the low results likelier; drawn again (rarely: < 1 in 2).
  uint32_t floor = static_cast<uint32_t>(-upper) % upper;
  for (;;) {
    uint32_t value;
    FillRandom(&value, sizeof value);
    if (value >= floor) return value % upper;
  }
}

int ClockWait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock, const timespec* deadline) {
  if (clock == CLOCK_REALTIME) return ::pthread_cond_timedwait(cond, mutex, deadline);
  if (clock != CLOCK_MONOTONIC) return EINVAL;
  timespec now_clock;
  timespec now_real;
  ::clock_gettime(CLOCK_MONOTONIC, &now_clock);
  ::clock_gettime(CLOCK_REALTIME, &now_real);
  constexpr long kNano = 1000000000L;
  long long ns = (static_cast<long long>(deadline->tv_sec) - now_clock.tv_sec) * kNano +
                 (deadline->tv_nsec - now_clock.tv_nsec);
  if (ns <= 0) return ETIMEDOUT;
  long long real = static_cast<long long>(now_real.tv_sec) * kNano + now_real.tv_nsec + ns;
  timespec until{static_cast<time_t>(real / kNano), static_cast<long>(real % kNano)};
  return ::pthread_cond_timedwait(cond, mutex, &until);
}

}  // namespace distrun::portable
