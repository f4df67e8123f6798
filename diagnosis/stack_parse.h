#pragma once
// Parsers of the stack dumps that a hung rank's threads give: Python's faulthandler (all threads) and gdb's
// `thread apply all bt`. Each thread becomes its frames outermost first, every frame a label that names a
// call site the same way in every process of a job, free of addresses and argument values (ASLR and data
// differ per process), so that the merge (stack_tree.h) finds equal call sites equal:
//   Python      "func (file:line)", the file as faulthandler gave it
//   native      "function (file:line)" when gdb gave "at file:line", "function (libc.so.6)" when it gave
//               "from /path/libc.so.6", else "function"; gdb's unknown function is "??"
// Lines that are neither a thread's header nor a frame are ignored; text without any frame gives no thread.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace distrun {

struct ThreadStack {
  std::string name;                 // as the dump names it: faulthandler's thread id, gdb's number and name
  bool current = false;             // faulthandler's "Current thread" (or its single "Stack"); gdb's thread 1
  std::vector<std::string> frames;  // outermost first
};

// The frame label of a frame that some stacks end or start with, not a call site.
inline constexpr char kTruncatedFrame[] = "<truncated>";       // outermost frames left out of the dump
inline constexpr char kNoPythonFrame[] = "<no Python frame>";  // faulthandler's own words

// faulthandler.dump_traceback(all_threads=True) or a fatal error's dump: "Thread 0x... (most recent call
// first):" (or "Current thread ...", "Stack ...", with or without a name in brackets) followed by
// '  File "f.py", line 3 in g' lines, most recent first. A dump cut after 100 frames ("  ...") starts with
// kTruncatedFrame.
std::vector<ThreadStack> ParseFaulthandler(std::string_view text);

// gdb's `thread apply all bt` in batch mode: "Thread 2 (Thread 0x... (LWP 13780) "worker"):" or "Thread 1
// (process 123):" headers, each followed by "#N ..." frames, innermost first. A bare backtrace without a
// header is one (current) thread.
std::vector<ThreadStack> ParseGdbBacktrace(std::string_view text);

// The label of one faulthandler line ('  File "f.py", line 3 in g' -> "g (f.py:3)"); nullopt for any
// other line.
std::optional<std::string> FaulthandlerFrameLabel(std::string_view line);
// The label of one gdb frame line ("#2  0x... in f (a=1) at x.c:4" -> "f (x.c:4)"); nullopt for any other
// line.
std::optional<std::string> GdbFrameLabel(std::string_view line);

}  // namespace distrun
