#pragma once
// The progress board (DESIGN §4.2): how a worker tells its own distrun which step it reached, at the cost of
// a few stores to shared memory and no system call. distrun creates one small file per node, maps it, and
// gives each worker its slot (DISTRUN_PROGRESS_FILE, DISTRUN_PROGRESS_SLOT); the worker's client library,
// `distrun progress STEP` and the Python module map the same file and write their slot; the supervisor's
// loop reads every slot a few times a second. Nothing crosses the network per report: each node's summary
// rides its liveness stream.
//
// A slot is one cache line: a report count, the step and the report's CLOCK_MONOTONIC time (the clock
// steady_clock reads on Linux, so distrun can age a report without asking the worker).
//
// Sections (straggler detection, runtime/service/straggler_watch.h): after the slots, each slot has
// kSectionsPerSlot named sections, each a ring of its last kSectionRing durations and a count of runs. A
// worker names a section once (the name is written before its first count), then each run is two stores:
// the duration into the ring, the count (release). No message per run: the supervisor reads the rings.
// The layout is the Python module's too (python/distrun/__init__.py writes the mapped file directly).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

inline constexpr char kProgressFileVariable[] = "DISTRUN_PROGRESS_FILE";
inline constexpr char kProgressSlotVariable[] = "DISTRUN_PROGRESS_SLOT";
inline constexpr int kSectionsPerSlot = 8;
inline constexpr int kSectionRing = 56;        // durations kept per section: 64 + 8 * 56 bytes, 512 in all
inline constexpr size_t kSectionNameMax = 31;  // bytes of a section's name (longer names are cut)

struct ProgressSample {
  uint64_t reports = 0;  // 0: the worker in the slot never reported
  int64_t step = 0;
  int64_t time_ns = 0;  // CLOCK_MONOTONIC of the last report
};

// One named section of a slot: its runs so far and the most recent durations (at most kSectionRing,
// oldest first).
struct SectionSample {
  std::string name;
  uint64_t runs = 0;
  std::vector<int64_t> durations_ns;
};

// The mapped file; distrun owns one (Create), each worker maps it again (Open). Move-only.
class ProgressBoard {
 public:
  // Creates (or truncates) `path` with room for `slots` workers. Throws std::runtime_error naming the path.
  static ProgressBoard Create(const std::string& path, int slots);
  // Maps an existing board for writing one slot; nullopt with *error set when the file is missing, too
  // small for `slot` or not a board.
  static std::optional<ProgressBoard> Open(const std::string& path, int slot, std::string* error);

  ProgressBoard(ProgressBoard&& other) noexcept;
  ProgressBoard& operator=(ProgressBoard&& other) noexcept;
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;
  ~ProgressBoard();

  int slots() const { return slots_; }
  ProgressSample Read(int slot) const;
  // A new worker takes the slot: its predecessor's reports are forgotten.
  void Clear(int slot);
  // The worker's report (Open's slot, or any slot for tests): lock-free, safe from several threads.
  void Report(int slot, int64_t step);

  // The slot's named sections (those run at least once).
  std::vector<SectionSample> ReadSections(int slot) const;
  // The index of section `name` in `slot`, naming a free one on first use; -1 when the slot's sections are
  // all named otherwise (or `slot` is not on the board). One thread of the worker at a time: callers lock.
  int SectionIndex(int slot, std::string_view name);
  // One run of section `index` of `slot` took `duration_ns`. Lock-free; a run and a read of the same
  // entry at once give the reader one of the two durations.
  void RecordSection(int slot, int index, int64_t duration_ns);

 private:
  ProgressBoard(void* base, size_t size, int slots) : base_(base), size_(size), slots_(slots) {}
  void Unmap();

  void* base_ = nullptr;
  size_t size_ = 0;
  int slots_ = 0;
};

}  // namespace distrun
