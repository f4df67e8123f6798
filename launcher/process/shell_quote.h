#pragma once
// Words made safe for a POSIX shell command line: what --detect's env format, --dry-run and ssh's remote
// command print.

#include <string>
#include <vector>

namespace distrun {

// "it's" → "'it'\''s'": always quoted.
std::string ShellQuote(const std::string& s);
// Quoted only where a shell would change it ("/usr/bin/python3" stays as it is).
std::string ShellWord(const std::string& s);
// The words joined with blanks, each a ShellWord.
std::string ShellJoin(const std::vector<std::string>& words);

}  // namespace distrun
