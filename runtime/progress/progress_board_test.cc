#include "runtime/progress/progress_board.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace distrun {
namespace {

class ProgressBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("progress-board-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "progress").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(ProgressBoardTest, AWorkersReportReachesTheOwnersMapping) {
  ProgressBoard board = ProgressBoard::Create(path_, 4);
  EXPECT_EQ(board.Read(2).reports, 0u);
  std::string error;
  std::optional<ProgressBoard> worker = ProgressBoard::Open(path_, 2, &error);
  ASSERT_TRUE(worker) << error;
  worker->Report(2, 41);
  worker->Report(2, 42);
  ProgressSample s = board.Read(2);
  EXPECT_EQ(s.reports, 2u);
  EXPECT_EQ(s.step, 42);
  EXPECT_GT(s.time_ns, 0);
  EXPECT_EQ(board.Read(1).reports, 0u);  // slots are apart
  board.Clear(2);
  EXPECT_EQ(board.Read(2).reports, 0u);
}

TEST_F(ProgressBoardTest, ThreadsOfOneWorkerCountEveryReport) {
  ProgressBoard board = ProgressBoard::Create(path_, 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) board.Report(0, i);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(board.Read(0).reports, 40'000u);
}

TEST_F(ProgressBoardTest, OpeningWhatIsNoBoardSaysWhy) {
  std::string error;
  EXPECT_FALSE(ProgressBoard::Open((dir_ / "missing").string(), 0, &error));
  EXPECT_NE(error.find("cannot open the progress board"), std::string::npos) << error;
  { ProgressBoard board = ProgressBoard::Create(path_, 2); }
  EXPECT_FALSE(ProgressBoard::Open(path_, 2, &error));
  EXPECT_NE(error.find("progress slot 2 is not on the board"), std::string::npos) << error;
  std::filesystem::resize_file(path_, 8);
  EXPECT_FALSE(ProgressBoard::Open(path_, 0, &error));
  EXPECT_NE(error.find("is not a progress board"), std::string::npos) << error;
  // Out-of-range slots are ignored, never written.
  ProgressBoard board = ProgressBoard::Create(path_, 1);
  board.Report(5, 1);
  EXPECT_EQ(board.Read(5).reports, 0u);
}

TEST_F(ProgressBoardTest, SectionsKeepTheirNamesAndTheirLatestDurations) {
  ProgressBoard board = ProgressBoard::Create(path_, 2);
  std::string error;
  std::optional<ProgressBoard> worker = ProgressBoard::Open(path_, 1, &error);
  ASSERT_TRUE(worker) << error;
  const int fwd = worker->SectionIndex(1, "fwd");
  const int bwd = worker->SectionIndex(1, "bwd");
  EXPECT_EQ(worker->SectionIndex(1, "fwd"), fwd);
  EXPECT_NE(fwd, bwd);
  // Named but never run: not shown.
  EXPECT_TRUE(board.ReadSections(1).empty());
  for (int i = 1; i <= kSectionRing + 10; ++i) worker->RecordSection(1, fwd, i);
  worker->RecordSection(1, bwd, 7);
  std::vector<SectionSample> sections = board.ReadSections(1);
  ASSERT_EQ(sections.size(), 2u);
  EXPECT_EQ(sections[0].name, "fwd");
  EXPECT_EQ(sections[0].runs, static_cast<uint64_t>(kSectionRing + 10));
  ASSERT_EQ(sections[0].durations_ns.size(), static_cast<size_t>(kSectionRing));
  EXPECT_EQ(sections[0].durations_ns.front(), 11);  // the ring holds the latest, oldest first
  EXPECT_EQ(sections[0].durations_ns.back(), kSectionRing + 10);
  EXPECT_EQ(sections[1].name, "bwd");
  EXPECT_EQ(sections[1].durations_ns, std::vector<int64_t>{7});
  EXPECT_TRUE(board.ReadSections(0).empty());  // slots are apart

  // A long name is cut; a slot's sections run out after kSectionsPerSlot names.
  EXPECT_GE(worker->SectionIndex(1, std::string(100, 'x')), 0);
  for (int i = 0; i < kSectionsPerSlot; ++i) worker->SectionIndex(1, "s" + std::to_string(i));
  EXPECT_EQ(worker->SectionIndex(1, "one-too-many"), -1);
  // A new worker in the slot starts with no sections.
  board.Clear(1);
  EXPECT_TRUE(board.ReadSections(1).empty());
  EXPECT_EQ(worker->SectionIndex(1, "fwd"), 0);
}

TEST_F(ProgressBoardTest, ABoardOfAnotherLayoutIsRefused) {
  { ProgressBoard board = ProgressBoard::Create(path_, 1); }
  // An older distrun's magic.
  FILE* f = std::fopen(path_.c_str(), "r+");
  ASSERT_NE(f, nullptr);
  std::fputs("DRPROG1", f);
  std::fclose(f);
  std::string error;
  EXPECT_FALSE(ProgressBoard::Open(path_, 0, &error));
  EXPECT_NE(error.find("is not a progress board"), std::string::npos) << error;
}

}  // namespace
}  // namespace distrun
