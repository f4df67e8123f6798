#pragma once
// The job token check, shared by both of the coordinator's transports.

#include <cstddef>
#include <string>
#include <string_view>

namespace distrun {

// The longest job token. It travels in every gRPC call's metadata and in the agent channel's hello, which
// the coordinator reads before it knows who is speaking: both stay small.
inline constexpr size_t kMaxTokenBytes = 4096;

// Why `token` cannot be a job token, or "" when it can: it must be 1 to kMaxTokenBytes printable ASCII
// characters without spaces (what gRPC metadata carries as it is).
std::string TokenProblem(std::string_view token);

// Whether `given` is the job token `expected` (never empty: an empty token admits nobody). Takes the same
// time whatever part of a guess is right, so timing does not reveal it.
bool SameToken(const std::string& expected, std::string_view given);

}  // namespace distrun
