#include "launcher/config/closest_name.h"

#include <gtest/gtest.h>

namespace distrun {
namespace {

TEST(ClosestName, ANearMisspellingFindsItsName) {
  const std::vector<std::string> names = {"nproc-per-node", "node-rank", "num-nodes", "log-dir"};
  EXPECT_EQ(ClosestName("nproc-per-nod", names), "nproc-per-node");
  EXPECT_EQ(ClosestName("nprocs-per-node", names), "nproc-per-node");
  EXPECT_EQ(ClosestName("node-rnak", names), "node-rank");
  EXPECT_EQ(ClosestName("log-dir", names), "log-dir");
}

TEST(ClosestName, AWordFarFromEveryNameFindsNone) {
  const std::vector<std::string> names = {"nproc-per-node", "node-rank", "log-dir"};
  EXPECT_EQ(ClosestName("bogus", names), "");
  EXPECT_EQ(ClosestName("x", names), "");
  EXPECT_EQ(ClosestName("anything", {}), "");
}

}  // namespace
}  // namespace distrun
