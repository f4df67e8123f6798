#pragma once
// The job token check, shared by both of the coordinator's transports.

#include <string>
#include <string_view>

namespace distrun {

// Whether `given` is the job token `expected` (never empty: an empty token admits nobody). Takes the same
// time whatever part of a guess is right, so timing does not reveal it.
bool SameToken(const std::string& expected, std::string_view given);

}  // namespace distrun
