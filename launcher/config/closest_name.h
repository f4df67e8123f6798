#pragma once
// "did you mean ...?" for a misspelt option or config key: the candidate nearest to what was written.

#include <string>
#include <vector>

namespace distrun {

// The candidate with the fewest one-character edits from `word` (the first of equals), if that is at most 3
// and at most a third of the word's length plus one; empty otherwise.
std::string ClosestName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace distrun
