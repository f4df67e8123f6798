#pragma once
// `distrun kv …` and `distrun barrier …`: the runtime's key-value store and barriers for scripts that run
// as workers of a job (DESIGN §4). They find the service through the variables distrun gives every worker:
// DISTRUN_COORDINATOR_ADDRESS, DISTRUN_TOKEN and (for barriers) DISTRUN_PROCESS_ID.
//
// Exit codes: 0 success; 1 a negative answer (try-get or del: no such key; cas: the value differed);
// 2 usage error; 3 the service cannot be reached or refused the call; 124 a wait timed out.

#include <map>
#include <string>
#include <vector>

namespace distrun {

inline constexpr int kVerbNegativeExit = 1;
inline constexpr int kVerbServiceExit = 3;

// Whether `word` (argv[1]) names one of these verbs.
bool IsRuntimeVerb(const std::string& word);

// `args` starts with the verb ("kv", "set", "k", "v"). Prints values on stdout and one-line errors on
// stderr; returns the exit code.
int RunRuntimeVerb(const std::vector<std::string>& args,
                   const std::map<std::string, std::string, std::less<>>& env);

}  // namespace distrun
