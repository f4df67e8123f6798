#include "diagnosis/stack_parse.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace distrun {
namespace {

using Frames = std::vector<std::string>;

constexpr char kFaulthandler[] = R"(Thread 0x00007f2b5e7fc640 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
  File "/w/train.py", line 12 in loader

Current thread 0x00007f2b6a3b2740 (most recent call first):
  File "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py", line 1536 in all_reduce
  File "/w/train.py", line 30 in step
  File "/w/train.py", line 41 in <module>
)";

constexpr char kGdb[] = R"(Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
0x00007f637ba60f16 in __futex_abstimed_wait_common64 () from /lib/x86_64-linux-gnu/libc.so.6
warning: could not find '.gnu_debugaltlink' file

Thread 2 (Thread 0x7f6377fff6c0 (LWP 13780) "worker"):
#0  0x00007f637ba60f16 in __futex_abstimed_wait_common64 (private=0, cancel=true, abstime=0x0) at ./nptl/futex-internal.c:57
#1  __GI___lll_lock_wait (futex=futex@entry=0x56234f73a040 <m>, private=0) at ./nptl/lowlevellock.c:49
#2  0x00007f637ba69482 in lll_mutex_lock_optimized (mutex=0x56234f73a040 <m>) at ./nptl/pthread_mutex_lock.c:48
#3  ___pthread_mutex_lock (mutex=0x56234f73a040 <m>) at ./nptl/pthread_mutex_lock.c:93
#4  0x000056234f73715b in stuck_here ()
#5  0x000056234f737167 in main ()

Thread 1 (Thread 0x7f637b9da740 (LWP 13775) "dl"):
#0  futex_wait (private=0, expected=2, futex_word=0x56234f73a040 <m>) at ../sysdeps/nptl/futex-internal.h:146
146	../sysdeps/nptl/futex-internal.h: No such file or directory.
#1  0x00007f637ba5e2a1 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f637bae3c3c in clone3 () from /lib/x86_64-linux-gnu/libc.so.6
[Inferior 1 (process 13775) detached]
)";

TEST(StackParse, FaulthandlerAllThreads) {
  std::vector<ThreadStack> threads = ParseFaulthandler(kFaulthandler);
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0].name, "0x00007f2b5e7fc640");
  EXPECT_FALSE(threads[0].current);
  EXPECT_EQ(threads[0].frames,
            (Frames{"loader (/w/train.py:12)", "wait (/usr/lib/python3.11/threading.py:622)",
                    "wait (/usr/lib/python3.11/threading.py:320)"}));
  EXPECT_EQ(threads[1].name, "0x00007f2b6a3b2740");
  EXPECT_TRUE(threads[1].current);
  EXPECT_EQ(
      threads[1].frames,
      (Frames{"<module> (/w/train.py:41)", "step (/w/train.py:30)",
              "all_reduce (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1536)"}));
}

TEST(StackParse, FaulthandlerSingleStackNamesAndNoPythonFrame) {
  std::vector<ThreadStack> threads = ParseFaulthandler(
      "Fatal Python error: Segmentation fault\n\n"
      "Stack (most recent call first):\r\n"
      "  File \"a.py\", line 3 in f\r\n"
      "  File \"a.py\", line 9 in <module>\r\n"
      "\n"
      "Thread 0x00007f00 [pt_autograd_0] (most recent call first):\n"
      "  <no Python frame>\n"
      "\n"
      "Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n");
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_TRUE(threads[0].current);
  EXPECT_EQ(threads[0].name, "");
  EXPECT_EQ(threads[0].frames, (Frames{"<module> (a.py:9)", "f (a.py:3)"}));
  EXPECT_EQ(threads[1].name, "0x00007f00 [pt_autograd_0]");
  EXPECT_EQ(threads[1].frames, (Frames{kNoPythonFrame}));
}

TEST(StackParse, FaulthandlerTruncatedDump) {
  std::string text = "Current thread 0x1 (most recent call first):\n";
  for (int i = 0; i < 100; ++i) text += "  File \"r.py\", line " + std::to_string(i) + " in recurse\n";
  text += "  ...\n";
  std::vector<ThreadStack> threads = ParseFaulthandler(text);
  ASSERT_EQ(threads.size(), 1u);
  ASSERT_EQ(threads[0].frames.size(), 101u);
  EXPECT_EQ(threads[0].frames.front(), kTruncatedFrame);
  EXPECT_EQ(threads[0].frames[1], "recurse (r.py:99)");
  EXPECT_EQ(threads[0].frames.back(), "recurse (r.py:0)");
  // Cut off in the middle of a line: what came before is kept.
  std::vector<ThreadStack> cut = ParseFaulthandler(
      "Current thread 0x1 (most recent call first):\n"
      "  File \"r.py\", line 4 in f\n  File \"r.py\", li");
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].frames, (Frames{"f (r.py:4)"}));
}

TEST(StackParse, FaulthandlerGarbageAndEmpty) {
  EXPECT_TRUE(ParseFaulthandler("").empty());
  EXPECT_TRUE(ParseFaulthandler("\n\n").empty());
  EXPECT_TRUE(ParseFaulthandler("Traceback (most recent call last):\n  nonsense\n\x01\x02\xff").empty());
  EXPECT_TRUE(ParseFaulthandler("Thread 0x1 (most recent call first):\n").empty());  // no frame at all
  EXPECT_TRUE(ParseFaulthandler(std::string(1000, '"')).empty());
  EXPECT_FALSE(FaulthandlerFrameLabel("  File \"x.py\" line 3 in f"));
  // A frame without a header is one current thread.
  std::vector<ThreadStack> bare = ParseFaulthandler("  File \"x.py\", line 3 in f\n");
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_TRUE(bare[0].current);
  EXPECT_EQ(bare[0].frames, (Frames{"f (x.py:3)"}));
}

TEST(StackParse, GdbThreadApplyAllBt) {
  std::vector<ThreadStack> threads = ParseGdbBacktrace(kGdb);
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0].name, "2 \"worker\"");
  EXPECT_FALSE(threads[0].current);
  EXPECT_EQ(threads[0].frames,
            (Frames{"main", "stuck_here", "___pthread_mutex_lock (./nptl/pthread_mutex_lock.c:93)",
                    "lll_mutex_lock_optimized (./nptl/pthread_mutex_lock.c:48)",
                    "__GI___lll_lock_wait (./nptl/lowlevellock.c:49)",
                    "__futex_abstimed_wait_common64 (./nptl/futex-internal.c:57)"}));
  EXPECT_EQ(threads[1].name, "1 \"dl\"");
  EXPECT_TRUE(threads[1].current);
  EXPECT_EQ(threads[1].frames, (Frames{"clone3 (libc.so.6)", "?? (libc.so.6)",
                                       "futex_wait (../sysdeps/nptl/futex-internal.h:146)"}));
}

TEST(StackParse, GdbFrameLabels) {
  EXPECT_EQ(*GdbFrameLabel("#5  0x0000561 in ?? ()"), "??");
  EXPECT_EQ(*GdbFrameLabel("#3  <signal handler called>"), "<signal handler called>");
  // A C++ name keeps its own parentheses; the argument list is the last group.
  EXPECT_EQ(
      *GdbFrameLabel("#0  0x00007f in std::condition_variable::wait(std::unique_lock<std::mutex>&) () from "
                     "/lib/x86_64-linux-gnu/libstdc++.so.6"),
      "std::condition_variable::wait(std::unique_lock<std::mutex>&) (libstdc++.so.6)");
  EXPECT_EQ(*GdbFrameLabel("#7  0x1 in c10d::Work::wait (this=0x5, timeout=...) at work.cpp:12"),
            "c10d::Work::wait (work.cpp:12)");
  EXPECT_EQ(*GdbFrameLabel("#1  0x1 in f (s=0x2 \"a) at b.c:1 (\") at real.c:7"), "f (real.c:7)");
  EXPECT_EQ(*GdbFrameLabel("#1  0x1 in operator() (this=0x2) at l.cc:3"), "operator() (l.cc:3)");
  EXPECT_FALSE(GdbFrameLabel("146\t../sysdeps/nptl/futex-internal.h: No such file or directory."));
  EXPECT_FALSE(GdbFrameLabel("# comment"));
}

TEST(StackParse, GdbProcessHeaderAndBareBacktrace) {
  std::vector<ThreadStack> threads = ParseGdbBacktrace(
      "Thread 1 (process 123):\n#0  0x1 in pause () from /lib/libc.so.6\n#1  0x2 in main () at m.c:5\n");
  ASSERT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads[0].name, "1");
  EXPECT_TRUE(threads[0].current);
  EXPECT_EQ(threads[0].frames, (Frames{"main (m.c:5)", "pause (libc.so.6)"}));

  std::vector<ThreadStack> bare = ParseGdbBacktrace(
      "#0  0x1 in poll () from /lib/libc.so.6\n#1  0x2 in main ()\n"
      "(More stack frames follow...)\n");
  ASSERT_EQ(bare.size(), 1u);
  EXPECT_TRUE(bare[0].current);
  EXPECT_EQ(bare[0].frames, (Frames{kTruncatedFrame, "main", "poll (libc.so.6)"}));
}

TEST(StackParse, GdbGarbageAndEmpty) {
  EXPECT_TRUE(ParseGdbBacktrace("").empty());
  EXPECT_TRUE(ParseGdbBacktrace("No symbol table is loaded.\nptrace: Operation not permitted.\n").empty());
  EXPECT_TRUE(ParseGdbBacktrace("Thread 3 (Thread 0x7 (LWP 9)):\n").empty());
  std::vector<ThreadStack> odd = ParseGdbBacktrace("#0  0x1\n#1\n");
  ASSERT_EQ(odd.size(), 1u);  // frame lines without a name are unknown frames
  EXPECT_EQ(odd[0].frames, (Frames{"??", "??"}));
}

}  // namespace
}  // namespace distrun
