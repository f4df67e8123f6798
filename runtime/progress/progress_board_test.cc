#include "runtime/progress/progress_board.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

}  // namespace
}  // namespace distrun
