#include "runtime/progress/progress_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace distrun {
namespace {

constexpr char kMagic[8] = {'D', 'R', 'P', 'R', 'O', 'G', '1', '\0'};
constexpr size_t kLine = 64;  // header and slots: one cache line each, so workers never share one

struct Header {
  char magic[8];
  uint32_t slots;
};

// The writer bumps `reports` last (release), so a reader that sees a new count sees its step and time.
struct Slot {
  std::atomic<uint64_t> reports;
  std::atomic<int64_t> step;
  std::atomic<int64_t> time_ns;
};
static_assert(sizeof(Slot) <= kLine);
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int64_t>::is_always_lock_free,
              "slots are shared between processes");

size_t BoardSize(int slots) { return kLine * (1 + static_cast<size_t>(slots)); }

Slot* SlotAt(void* base, int slot) {
  return reinterpret_cast<Slot*>(static_cast<char*>(base) + kLine * (1 + static_cast<size_t>(slot)));
}

int64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string Errno(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

ProgressBoard ProgressBoard::Create(const std::string& path, int slots) {
  if (slots < 0) throw std::runtime_error("a progress board cannot have " + std::to_string(slots) + " slots");
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error(Errno("cannot create the progress board", path));
  const size_t size = BoardSize(slots);
  // Zero-filled by ftruncate: every slot starts with no reports.
  if (::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    std::string message = Errno("cannot size the progress board", path);
    ::close(fd);
    throw std::runtime_error(message);
  }
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) throw std::runtime_error(Errno("cannot map the progress board", path));
  auto* header = static_cast<Header*>(base);
  header->slots = static_cast<uint32_t>(slots);
  std::memcpy(header->magic, kMagic, sizeof kMagic);
  return ProgressBoard(base, size, slots);
}

std::optional<ProgressBoard> ProgressBoard::Open(const std::string& path, int slot, std::string* error) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *error = Errno("cannot open the progress board", path);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < BoardSize(0)) {
    ::close(fd);
    *error = path + " is not a progress board (too small)";
    return std::nullopt;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    *error = Errno("cannot map the progress board", path);
    return std::nullopt;
  }
  ProgressBoard board(base, size, 0);
  const auto* header = static_cast<const Header*>(base);
  if (std::memcmp(header->magic, kMagic, sizeof kMagic) != 0) {
    *error = path + " is not a progress board";
    return std::nullopt;
  }
  const int slots = static_cast<int>(header->slots);
  if (BoardSize(slots) > size || slot < 0 || slot >= slots) {
    *error = "progress slot " + std::to_string(slot) + " is not on the board " + path + " (" +
             std::to_string(slots) + " slots)";
    return std::nullopt;
  }
  board.slots_ = slots;
  return board;
}

ProgressBoard::ProgressBoard(ProgressBoard&& other) noexcept
    : base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      slots_(std::exchange(other.slots_, 0)) {}

ProgressBoard& ProgressBoard::operator=(ProgressBoard&& other) noexcept {
  if (this != &other) {
    Unmap();
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    slots_ = std::exchange(other.slots_, 0);
  }
  return *this;
}

ProgressBoard::~ProgressBoard() { Unmap(); }

void ProgressBoard::Unmap() {
  if (base_ != nullptr) ::munmap(base_, size_);
  base_ = nullptr;
}

ProgressSample ProgressBoard::Read(int slot) const {
  ProgressSample s;
  if (slot < 0 || slot >= slots_) return s;
  const Slot* p = SlotAt(base_, slot);
  s.reports = p->reports.load(std::memory_order_acquire);
  s.step = p->step.load(std::memory_order_relaxed);
  s.time_ns = p->time_ns.load(std::memory_order_relaxed);
  return s;
}

void ProgressBoard::Clear(int slot) {
  if (slot < 0 || slot >= slots_) return;
  Slot* p = SlotAt(base_, slot);
  p->step.store(0, std::memory_order_relaxed);
  p->time_ns.store(0, std::memory_order_relaxed);
  p->reports.store(0, std::memory_order_release);
}

void ProgressBoard::Report(int slot, int64_t step) {
  if (slot < 0 || slot >= slots_) return;
  Slot* p = SlotAt(base_, slot);
  p->step.store(step, std::memory_order_relaxed);
  p->time_ns.store(MonotonicNs(), std::memory_order_relaxed);
  p->reports.fetch_add(1, std::memory_order_release);
}

}  // namespace distrun
