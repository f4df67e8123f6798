#pragma once
// Errors a user can fix: bad flags, bad variables, bad config. main() prints the one-line message and
// exits with code 2. Messages name the input, its value and what would be right.

#include <stdexcept>
#include <string>

namespace distrun {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace distrun
