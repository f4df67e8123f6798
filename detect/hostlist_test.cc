#include "detect/hostlist.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "detect/errors.h"

namespace distrun {
namespace {

using Hosts = std::vector<std::string>;

std::string Join(const Hosts& hosts) {
  std::string out;
  for (const std::string& h : hosts) out += (out.empty() ? "" : " ") + h;
  return out;
}

// The error text, or "" when the list is valid.
std::string ErrorOf(std::string_view value) {
  try {
    ExpandHostlist("SLURM_STEP_NODELIST", value);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

struct Case {
  const char* input;
  const char* hosts;  // space-joined
};

TEST(Hostlist, ClusterFactsExamples) {
  const Case cases[] = {
      {"tux0-5", "tux0-5"},
      {"n1-3]", "n1-3]"},
      {"n[1-2]]", "n1] n2]"},
      {"n[[1-2]]", "n[1] n[2]"},
      {"n[1-2]:8", "n1:8 n2:8"},
      {"[1-3]", "1 2 3"},
      {"n[8-012]", "n8 n9 n10 n11 n12"},
      {"n[01-3]", "n01 n02 n03"},
      {"n[008-12]", "n008 n009 n010 n011 n012"},
      {"n[ 1-3]", "n01 n02 n03"},
      {"n[+1-3]", "n01 n02 n03"},
      {"n[1-3].foo", "n1.foo n2.foo n3.foo"},
      {"rack[1-2]-node[01-02]", "rack1-node01 rack1-node02 rack2-node01 rack2-node02"},
      {"x[1-2]y[3-4]z[5-6]", "x1y3z5 x1y3z6 x2y3z5 x2y3z6 x1y4z5 x1y4z6 x2y4z5 x2y4z6"},
      {"n[1-2],n1", "n1 n2 n1"},
      {"10.0.0.[1-3]", "10.0.0.1 10.0.0.2 10.0.0.3"},
      {"n[1-2]-ib", "n1-ib n2-ib"},
  };
  for (const Case& c : cases) EXPECT_EQ(Join(ExpandHostlist("V", c.input)), c.hosts) << c.input;
  Hosts big = ExpandHostlist("V", "n[0-65535]x");
  ASSERT_EQ(big.size(), 65536u);
  EXPECT_EQ(big.front(), "n0x");
  EXPECT_EQ(big.back(), "n65535x");
}

TEST(Hostlist, SeparatorsAndEmptyTokens) {
  const Case cases[] = {
      {"", ""},
      {",, \t\n", ""},
      {"a b,,c\td\ne", "a b c d e"},
      {",n,", "n"},
      {"n[1-3],", "n1 n2 n3"},
      {"n[1-2] ,x", "n1 n2 x"},
      // Separators inside brackets do not split; the space pads like strtoul's skipped blank.
      {"n[1, 2]", "n1 n02"},
      {"n[1,\n2]", "n1 n02"},
      {"n[\t1-2]", "n01 n02"},
  };
  for (const Case& c : cases) EXPECT_EQ(Join(ExpandHostlist("V", c.input)), c.hosts) << c.input;
}

TEST(Hostlist, RangesAndPadding) {
  const Case cases[] = {
      {"n[1-]", "n1"},
      {"n[1- 3]", "n1 n2 n3"},
      {"n[1-+3]", "n1 n2 n3"},
      {"n[007]", "n007"},
      {"n007", "n007"},
      {"n[ 1]", "n01"},
      {"n[+1]", "n01"},
      {"n[0001-3],n[4-5]", "n0001 n0002 n0003 n4 n5"},
      {"n[8-9],n[10-11]", "n8 n9 n10 n11"},
      {"n[09],n[10]", "n09 n10"},
      {"n9,n[010]", "n9 n010"},
      {"n[0-1,0-1]", "n0 n1 n0 n1"},
      {"n[3,1,2]", "n3 n1 n2"},
      {"n[98-101]", "n98 n99 n100 n101"},
      {"n[18446744073709551614-18446744073709551615]", "n18446744073709551614 n18446744073709551615"},
      {"n[0000000000000000000000001]", "n0000000000000000000000001"},
  };
  for (const Case& c : cases) EXPECT_EQ(Join(ExpandHostlist("V", c.input)), c.hosts) << c.input;
}

TEST(Hostlist, SeveralBrackets) {
  const Case cases[] = {
      {"a[1-2]b[1-2]", "a1b1 a1b2 a2b1 a2b2"},
      {"a[1,3-4]b[5]", "a1b5 a3b5 a4b5"},
      {"a[1-2][3-4]", "a13 a14 a23 a24"},
      {"a[1-2]b[3-4]c[5-6]d[7-8]",
       "a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 a1b4c5d8 a2b4c5d7 a2b4c5d8 "
       "a1b3c6d7 a1b3c6d8 a2b3c6d7 a2b3c6d8 a1b4c6d7 a1b4c6d8 a2b4c6d7 a2b4c6d8"},
      {"x[1-2]y[3-4]z", "x1y3z x1y4z x2y3z x2y4z"},
      {"rack[1-2]-node[01-02]-ib", "rack1-node01-ib rack1-node02-ib rack2-node01-ib rack2-node02-ib"},
      // Text with unpaired brackets stays literal, as Slurm keeps it.
      {"a]b[1-2]", "a]b1 a]b2"},
      {"n[[1]", "n[1"},
      {"a[1]b[[2]", "a[1]b[2"},
      {"n[1,[2]", "n[1,2"},
      {"n[1-2]]]", "n1]] n2]]"},
      {"n[1-2]]x", "n1]x n2]x"},
      {"]", "]"},
      {"n]", "n]"},
  };
  for (const Case& c : cases) EXPECT_EQ(Join(ExpandHostlist("V", c.input)), c.hosts) << c.input;
}

TEST(Hostlist, RejectsInvalidForms) {
  for (const char* bad : {"n[]",
                          "n[1,]",
                          "n[,1]",
                          "n[1,,2]",
                          "n[3-1]",
                          "n[-1]",
                          "n[-]",
                          "n[1--2]",
                          "n[1-3:2]",
                          "n[1-3 ]",
                          "n[1 ]",
                          "n[a-b]",
                          "n[1a-3]",
                          "n[0x10]",
                          "n[1e3]",
                          "n[1-2-3]",
                          "n[1-3",
                          "n[",
                          "[",
                          "n[1]x[",
                          "n[0-65536]",
                          "a[1-2]]b[3]",
                          "a[b]c[1-2]",
                          "a[3-1]b[1-2]",
                          "n[1-2],m[",
                          "good,n[2-1],good",
                          "n[0- -0]",
                          "n[1-x]",
                          "n[99999999999999999999]",
                          "n[18446744073709551615-18446744073709551616]",
                          "a[0-40000,0-40000]b[1]",
                          "[]",
                          "a[1,2]b[]",
                          "n[ ]",
                          "n[+]",
                          "n[++1]",
                          "n[1-++2]",
                          "n[-+1]"}) {
    EXPECT_NE(ErrorOf(bad), "") << bad;
  }
}

TEST(Hostlist, UnbalancedSplitsLikeSlurm) {
  // Slurm's tokenizer ends "a]b[1" at the comma (the ']' comes before the '['), leaving it unclosed.
  EXPECT_NE(ErrorOf("a]b[1,2]"), "");
}

TEST(Hostlist, LimitsPerRangeAndPerBracket) {
  EXPECT_EQ(ExpandHostlist("V", "n[0-65535]").size(), 65536u);
  EXPECT_EQ(ExpandHostlist("V", "n[0-65535,0-65535]").size(), 131072u);
  EXPECT_EQ(ExpandHostlist("V", "a[0-65535]b[1]").size(), 65536u);
  std::string e = ErrorOf("n[0-65536]");
  EXPECT_NE(e.find("65537 hosts"), std::string::npos) << e;
  EXPECT_NE(e.find("n[0-65535,65536]"), std::string::npos) << e;
  e = ErrorOf("a[0-40000,0-40000]b[1]");
  EXPECT_NE(e.find("another bracket follows"), std::string::npos) << e;
}

TEST(Hostlist, TotalCapStopsNestedBlowUp) {
  for (const char* huge : {"a[0-65535]b[0-65535]", "a[0-65535]b[0-65535]c[0-65535]d[0-65535]e[0-65535]",
                           "n[0-65535],m[0-65535],o[0-65535],p[0-65535],q[0-65535],r[0-65535],s[0-65535],"
                           "t[0-65535],u[0-65535],v[0-65535],w[0-65535],x[0-65535],y[0-65535],z[0-65535],"
                           "a[0-65535],b[0-65535],c[0-65535]"}) {
    std::string e = ErrorOf(huge);
    EXPECT_NE(e.find("distrun's limit of 1048576 hosts"), std::string::npos) << e;
  }
  std::string e = ErrorOf("a[0-65535]b[0-65535]");
  EXPECT_NE(e.find("4294967296 hosts"), std::string::npos) << e;
  // Exactly at the cap is fine.
  EXPECT_EQ(ExpandHostlist("V", "a[0-15]b[0-65535]").size(), kMaxHostlistHosts);
}

TEST(Hostlist, ByteCapStopsLongNames) {
  std::string long_prefix(1500, 'p');
  // 1500 bytes x 65536 x 1 = 98 MB of names.
  std::string e = ErrorOf(long_prefix + "[0-65535]");
  EXPECT_NE(e.find("bytes"), std::string::npos) << e;
  EXPECT_NE(e.find("...("), std::string::npos) << "long values are cut: " << e;
  EXPECT_EQ(ExpandHostlist("V", std::string(900, 'p') + "[0-65535]").size(), 65536u);
}

TEST(Hostlist, MessagesNameVariableValueTokenAndFix) {
  EXPECT_EQ(ErrorOf("node[3-1]"),
            "SLURM_STEP_NODELIST='node[3-1]' is not a valid hostlist: range 3-1 in 'node[3-1]' runs "
            "backwards; write node[1-3]");
  std::string e = ErrorOf("a,n[03-1]");
  EXPECT_NE(e.find("write n[01-03]"), std::string::npos) << e;
  e = ErrorOf("n[1-3:2]");
  EXPECT_NE(e.find("job-array"), std::string::npos) << e;
  e = ErrorOf("n1,n[1-3");
  EXPECT_NE(e.find("SLURM_STEP_NODELIST='n1,n[1-3'"), std::string::npos) << e;
  EXPECT_NE(e.find("never closed; write 'n[1-3]'"), std::string::npos) << e;
  e = ErrorOf("n[]");
  EXPECT_NE(e.find("empty brackets"), std::string::npos) << e;
  e = ErrorOf("n[1,,2]");
  EXPECT_NE(e.find("empty range at offset 4 of 'n[1,,2]'"), std::string::npos) << e;
  e = ErrorOf("n[a-b]");
  EXPECT_NE(e.find("range 'a-b' in 'n[a-b]'"), std::string::npos) << e;
  e = ErrorOf("n[-1]");
  EXPECT_NE(e.find("no low bound"), std::string::npos) << e;
  e = ErrorOf("n[99999999999999999999]");
  EXPECT_NE(e.find("too large"), std::string::npos) << e;
}

TEST(Hostlist, MessagesStayOnOneLine) {
  for (const char* bad : {"a\nn[3-1]", "n[\n3-1]", "n[1,\t]", "x\n[", "n[\x01]"}) {
    std::string e = ErrorOf(bad);
    ASSERT_NE(e, "") << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_EQ(e.find('\t'), std::string::npos) << e;
  }
  std::string with_nul("n[1]\0x", 6);
  EXPECT_NE(ErrorOf(with_nul).find("NUL"), std::string::npos);
}

// Inputs of the kind the fuzzers favour (their runs found nothing to fix; if they do, add the reproducer
// here).
TEST(Hostlist, PathologicalInputs) {
  EXPECT_NE(ErrorOf("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]"), "");
  EXPECT_NE(ErrorOf("]]]]]]]["), "");
  // In a prefix the group ends at the last ']' after its '[', as in Slurm: "0]" is no number.
  EXPECT_NE(ErrorOf("[0]][0]][0]]"), "");
  EXPECT_NE(ErrorOf("[0-65535][0-65535][0-65535][0-65535]"), "");
  EXPECT_EQ(Join(ExpandHostlist("V", "[18446744073709551615-]")), "18446744073709551615");
  EXPECT_EQ(Join(ExpandHostlist("V", "[ 18446744073709551615- +18446744073709551615]")),
            "018446744073709551615");
  EXPECT_NE(ErrorOf("[18446744073709551615-18446744073709551616]"), "");
  // Many tokens and no bracket: the tokenizer must stay linear (Slurm's rescans for '[' per token).
  std::string many;
  for (int i = 0; i < 200000; ++i) many += "a,";
  EXPECT_EQ(ExpandHostlist("V", many + "n[1-2]").size(), 200002u);
  std::string ones = "n[";
  for (int i = 0; i < 65535; ++i) ones += "1,";
  EXPECT_EQ(ExpandHostlist("V", ones + "1]").size(), 65536u) << "Slurm's MAX_RANGES allows 65536 entries";
  EXPECT_NE(ErrorOf(ones + "1,1]").find("more than 65536 comma-separated ranges"), std::string::npos);
}

// ---- Differential test against the real `scontrol show hostnames` ----------------------------------

struct ProcessResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs argv with exactly `env`, collecting stdout and stderr. Fails the test when it cannot start.
ProcessResult Run(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  ProcessResult result;
  int out_pipe[2];
  int err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    ADD_FAILURE() << "cannot run " << argv[0] << ": " << std::strerror(rc)
                  << " (install slurm-client, see scripts/install-deps.sh)";
    return result;
  }
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[65536];
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

Hosts Lines(const std::string& text) {
  Hosts lines;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    lines.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

// Random expressions in the part of the grammar where Debian's Slurm 22.05 and current Slurm agree: no
// text after a token's last bracket, no newline separators, no unclosed brackets, no strtoul junk.
class ExpressionMaker {
 public:
  explicit ExpressionMaker(uint32_t seed) : rng_(seed) {}

  size_t Pick(size_t n) { return static_cast<size_t>(rng_() % n); }
  bool OneIn(size_t n) { return Pick(n) == 0; }

  std::string Name() {
    static constexpr const char* kNames[] = {"n",       "node", "gpu-", "rack", "tux",
                                             "10.0.0.", "a_b",  "x.y",  "c"};
    std::string name = kNames[Pick(std::size(kNames))];
    if (OneIn(3)) name += std::to_string(Pick(30));
    if (OneIn(4)) name += "-";
    return name;
  }

  std::string Literal() {
    std::string name = Name();
    if (OneIn(2)) name += std::string(Pick(3), '0') + std::to_string(Pick(200));
    if (OneIn(12)) name += "]";
    return name;
  }

  std::string Element(size_t max_span) {
    uint64_t lo = Pick(3) == 0 ? Pick(12) : Pick(1100);
    std::string lo_text = std::string(Pick(4) == 0 ? Pick(3) + 1 : 0, '0') + std::to_string(lo);
    if (OneIn(20)) lo_text = (OneIn(2) ? " " : "+") + lo_text;
    switch (Pick(3)) {
      case 0:
        return lo_text;
      case 1:
        return lo_text + "-";
      default: {
        uint64_t hi = lo + Pick(max_span + 1);
        std::string hi_text = (OneIn(5) ? "0" : "") + std::to_string(hi);
        return lo_text + "-" + hi_text;
      }
    }
  }

  std::string Body(size_t max_elems, size_t max_span) {
    std::string body;
    size_t n = 1 + Pick(max_elems);
    for (size_t i = 0; i < n; ++i) body += (i ? "," : "") + Element(max_span);
    return body;
  }

  std::string BracketToken(size_t max_groups = 3) {
    size_t groups = 1 + Pick(max_groups);
    std::string token = OneIn(10) ? "" : Name();
    if (OneIn(15)) token += "[";  // an unpaired '[' in the prefix stays literal
    for (size_t g = 0; g < groups; ++g) {
      if (g > 0 && !OneIn(8)) token += Name();
      token += "[" + Body(groups == 1 ? 3 : 2, groups == 1 ? 5 : 2) + "]";
    }
    return token;
  }

  std::string Valid() {
    static constexpr const char* kSeps[] = {",", ",", ",", " ", "\t", ", ", ",,", " \t"};
    std::string expr = OneIn(10) ? kSeps[Pick(std::size(kSeps))] : "";
    size_t tokens = 1 + Pick(4);
    for (size_t i = 0; i < tokens; ++i) {
      if (i > 0) expr += kSeps[Pick(std::size(kSeps))];
      expr += OneIn(3) ? Literal() : BracketToken();
    }
    if (OneIn(10)) expr += ",";
    return expr;
  }

  // A valid expression with one bracket body broken in a way both versions reject. At most two groups:
  // with three or more, Slurm 22.05 drops the error of an inner prefix group (its recursion keeps
  // MAX(0, -1)) and prints the hosts it did expand; current distrun rejects those lists.
  std::string Invalid() {
    static constexpr const char* kBad[] = {"",     "3-1", "-1",      "1-3:2", "1-3 ", "a-b", "0-65536",
                                           "1--2", "1,",  ",1",      "x",     "1 ",   "5-2", "1-2-3",
                                           "1,,2", "0x1", "1-3,7-6", "+",     "-",    "1-a", "99999-0"};
    std::string token = BracketToken(2);
    // Replace one whole bracket body (they hold no brackets themselves).
    std::vector<size_t> opens;
    for (size_t i = 0; i < token.size(); ++i) {
      if (token[i] == '[' && i + 1 < token.size() && token[i + 1] != '[') opens.push_back(i);
    }
    size_t open = opens[Pick(opens.size())];
    size_t close = token.find(']', open);
    token = token.substr(0, open + 1) + kBad[Pick(std::size(kBad))] + token.substr(close);
    return OneIn(2) ? Literal() + "," + token : token;
  }

 private:
  std::mt19937 rng_;
};

class ScontrolFixture {
 public:
  ScontrolFixture() {
    std::string templ = ::testing::TempDir() + "distrun-hostlist-XXXXXX";
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
      return;
    }
    dir_ = buf.data();
    // Enough for scontrol to start without a controller; with SLURM_CONF set it makes no DNS SRV query
    // and no network call at all (checked with strace -e trace=network).
    std::ofstream(dir_ / "slurm.conf") << "ClusterName=distrun-test\nSlurmctldHost=localhost\n";
  }
  ~ScontrolFixture() {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }

  ProcessResult Hostnames(const std::string& expr) const {
    return Run({"scontrol", "show", "hostnames", expr},
               {"SLURM_CONF=" + (dir_ / "slurm.conf").string(), "LC_ALL=C"});
  }

 private:
  std::filesystem::path dir_;
};

// Compares one expression; returns false after reporting a mismatch.
bool CompareOne(const ScontrolFixture& slurm, const std::string& expr) {
  ProcessResult r = slurm.Hostnames(expr);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "scontrol exited " << r.exit_code << " for '" << expr << "': " << r.err;
    return false;
  }
  bool slurm_invalid = r.err.find("Invalid hostlist") != std::string::npos;
  std::string error = ErrorOf(expr);
  if (slurm_invalid || !error.empty()) {
    EXPECT_TRUE(slurm_invalid && r.out.empty() && !error.empty())
        << "validity differs for '" << expr << "': scontrol stdout '" << r.out << "' stderr '" << r.err
        << "', distrun: " << (error.empty() ? "valid" : error);
    return slurm_invalid && !error.empty();
  }
  Hosts ours = ExpandHostlist("V", expr);
  EXPECT_EQ(ours, Lines(r.out)) << "expression '" << expr << "'";
  return ours == Lines(r.out);
}

TEST(HostlistDifferential, MatchesScontrol) {
  ScontrolFixture slurm;
  ExpressionMaker maker(20240611);
  std::vector<std::string> valid = {"[1-3]",
                                    "n[8-012]",
                                    "n[01-3]",
                                    "n[008-12]",
                                    "n[ 1-3]",
                                    "n[+1-3]",
                                    "rack[1-2]-node[01-02]",
                                    "x[1-2]y[3-4]z[5-6]",
                                    "n[1-2],n1",
                                    "10.0.0.[1-3]",
                                    "tux0-5",
                                    "n1-3]",
                                    "n[1, 2]",
                                    "a b,,c\td",
                                    "n[1-]",
                                    "n[1- 3]",
                                    "a[1]b[[2]",
                                    "n[[1]",
                                    "a]b[1-2]",
                                    "n[0-1,0-1]",
                                    "n[0001-3],n[4-5]",
                                    "n[8-9],n[10-11]",
                                    "n[09],n[10]",
                                    "n9,n[010]",
                                    "a[1-2]b[3-4]c[5-6]d[7-8]",
                                    "n[1,[2]",
                                    "n[0-65535]"};
  std::vector<std::string> invalid = {"n[]",
                                      "n[1,]",
                                      "n[,1]",
                                      "n[3-1]",
                                      "n[-1]",
                                      "n[1-3:2]",
                                      "n[1-3 ]",
                                      "n[a-b]",
                                      "n[0-65536]",
                                      "a[1-2]]b[3]",
                                      "a[b]c[1-2]",
                                      "[]",
                                      "a[0-40000,0-40000]b[1]"};
  for (int i = 0; i < 300; ++i) valid.push_back(maker.Valid());
  for (int i = 0; i < 40; ++i) invalid.push_back(maker.Invalid());

  // One scontrol run for all valid expressions, split by a sentinel host that cannot join any range.
  const std::string sentinel = "distrun-sentinel-host";
  std::string batch;
  for (const std::string& expr : valid) batch += expr + "," + sentinel + ",";
  ProcessResult r = slurm.Hostnames(batch);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<Hosts> segments(1);
  for (std::string& line : Lines(r.out)) {
    if (line == sentinel) {
      segments.emplace_back();
    } else {
      segments.back().push_back(std::move(line));
    }
  }
  bool batch_ok = r.err.empty() && segments.size() == valid.size() + 1;
  size_t compared_hosts = 0;
  for (size_t i = 0; batch_ok && i < valid.size(); ++i) {
    compared_hosts += segments[i].size();
    Hosts ours;
    std::string error;
    try {
      ours = ExpandHostlist("V", valid[i]);
    } catch (const UsageError& e) {
      error = e.what();
    }
    EXPECT_EQ(error, "") << "'" << valid[i] << "'";
    EXPECT_EQ(ours, segments[i]) << "expression '" << valid[i] << "'";
  }
  if (batch_ok) {
    EXPECT_GT(compared_hosts, 3000u) << "the generator should make lists of some size";
  }
  if (!batch_ok) {
    // Something in the batch was invalid to scontrol: compare one by one to say which.
    ADD_FAILURE() << "scontrol rejected or mangled the batch: " << r.err;
    for (const std::string& expr : valid) CompareOne(slurm, expr);
  }
  for (const std::string& expr : invalid) {
    EXPECT_NE(ErrorOf(expr), "") << "'" << expr << "' should be invalid";
    CompareOne(slurm, expr);
  }
}

}  // namespace
}  // namespace distrun
