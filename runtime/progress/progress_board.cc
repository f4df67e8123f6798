#include "runtime/progress/progress_board.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace distrun {
namespace {

// '2': slots followed by sections; a worker of an older distrun (or newer) refuses the file.
constexpr char kMagic[8] = {'D', 'R', 'P', 'R', 'O', 'G', '2', '\0'};
constexpr size_t kLine = 64;  // header and slots: one cache line each, so workers never share one

struct Header {
  char magic[8];
  uint32_t slots;
  uint32_t sections_per_slot;  // what the layout below holds, for readers in other languages
  uint32_t section_ring;
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

// A section: its name and run count on one line, then the ring. The count is written last (release): a
// reader that sees it sees the name and the durations before it.
struct Section {
  char name[kSectionNameMax + 1];
  std::atomic<uint64_t> runs;
  char pad[kLine - (kSectionNameMax + 1) - sizeof(std::atomic<uint64_t>)];
  std::atomic<int64_t> ring[kSectionRing];
};
static_assert(sizeof(Section) == kLine + 8 * kSectionRing && sizeof(Section) % kLine == 0);

size_t SlotsEnd(int slots) { return kLine * (1 + static_cast<size_t>(slots)); }

size_t BoardSize(int slots) {
  return SlotsEnd(slots) + sizeof(Section) * kSectionsPerSlot * static_cast<size_t>(slots);
}

Section* SectionAt(void* base, int slots, int slot, int index) {
  const size_t at = SlotsEnd(slots) + sizeof(Section) * (static_cast<size_t>(slot) * kSectionsPerSlot +
                                                         static_cast<size_t>(index));
  return reinterpret_cast<Section*>(static_cast<char*>(base) + at);
}

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
  header->sections_per_slot = kSectionsPerSlot;
  header->section_ring = kSectionRing;
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
  if (header->sections_per_slot != kSectionsPerSlot || header->section_ring != kSectionRing) {
    *error = path + " is a progress board of another layout (another distrun's)";
    return std::nullopt;
  }
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
  for (int i = 0; i < kSectionsPerSlot; ++i) {
    Section* section = SectionAt(base_, slots_, slot, i);
    section->runs.store(0, std::memory_order_release);
    std::memset(section->name, 0, sizeof section->name);
  }
}

void ProgressBoard::Report(int slot, int64_t step) {
  if (slot < 0 || slot >= slots_) return;
  Slot* p = SlotAt(base_, slot);
  p->step.store(step, std::memory_order_relaxed);
  p->time_ns.store(MonotonicNs(), std::memory_order_relaxed);
  p->reports.fetch_add(1, std::memory_order_release);
}

std::vector<SectionSample> ProgressBoard::ReadSections(int slot) const {
  std::vector<SectionSample> out;
  if (slot < 0 || slot >= slots_) return out;
  for (int i = 0; i < kSectionsPerSlot; ++i) {
    const Section* section = SectionAt(base_, slots_, slot, i);
    const uint64_t runs = section->runs.load(std::memory_order_acquire);
    if (runs == 0) continue;
    SectionSample s;
    s.name.assign(section->name, strnlen(section->name, sizeof section->name));
    s.runs = runs;
    const uint64_t kept = std::min<uint64_t>(runs, kSectionRing);
    s.durations_ns.reserve(kept);
    for (uint64_t r = runs - kept; r < runs; ++r) {
      s.durations_ns.push_back(section->ring[r % kSectionRing].load(std::memory_order_relaxed));
    }
    out.push_back(std::move(s));
  }
  return out;
}

int ProgressBoard::SectionIndex(int slot, std::string_view name) {
  if (slot < 0 || slot >= slots_) return -1;
  name = name.substr(0, kSectionNameMax);
  for (int i = 0; i < kSectionsPerSlot; ++i) {
    Section* section = SectionAt(base_, slots_, slot, i);
    const std::string_view named(section->name, strnlen(section->name, sizeof section->name));
    if (named == name) return i;
    if (named.empty()) {
      // Unnamed until now: the name is in place before the first run's count makes the section visible.
      std::memcpy(section->name, name.data(), name.size());
      return i;
    }
  }
  return -1;
}

void ProgressBoard::RecordSection(int slot, int index, int64_t duration_ns) {
  if (slot < 0 || slot >= slots_ || index < 0 || index >= kSectionsPerSlot) return;
  Section* section = SectionAt(base_, slots_, slot, index);
  const uint64_t runs = section->runs.load(std::memory_order_relaxed);
  section->ring[runs % kSectionRing].store(duration_ns, std::memory_order_relaxed);
  section->runs.store(runs + 1, std::memory_order_release);
}

}  // namespace distrun
