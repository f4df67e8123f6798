#pragma once
// For the diagnosis tests: a rank's stack made of frame labels, as the parsers would give it.

#include <string>
#include <vector>

#include "diagnosis/stack_tree.h"

namespace distrun::testing {

using Frames = std::vector<std::string>;

// Rank `rank` on host node<rank/2>, pid 100+rank, gpu rank%2; thread 0 is the current one.
inline RankStack Rank(int rank, std::vector<Frames> threads) {
  RankStack r;
  r.rank = rank;
  r.host = "node" + std::to_string(rank / 2);
  r.pid = 100 + rank;
  r.gpu = std::to_string(rank % 2);
  r.mechanism = "python";
  for (size_t i = 0; i < threads.size(); ++i)
    r.threads.push_back({"t" + std::to_string(i), i == 0, threads[i]});
  return r;
}

}  // namespace distrun::testing
