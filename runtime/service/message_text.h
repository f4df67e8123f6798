#pragma once
// Pieces of the coordination service's messages, shared by its files.

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace distrun {

constexpr size_t kMaxNamesInMessage = 8;  // longer lists end with "and N more"

// A measured duration, as people read one: "4.2s" below 10 s, "62s" above.
std::string MeasuredSeconds(std::chrono::milliseconds d);

// "a, b, c and 4 more": `total` counts names beyond those given (callers stop naming at
// kMaxNamesInMessage).
std::string JoinNames(const std::vector<std::string>& names, size_t total);
std::string JoinNames(const std::vector<std::string>& names);

}  // namespace distrun
