#include "detect/proxy_check.h"

#include <gtest/gtest.h>

#include <string>

#include "test_support.h"

namespace distrun {
namespace {

using testing::MakeEnv;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Proxy, NoProxyExactAndSuffixMatches) {
  EXPECT_TRUE(NoProxyCovers("node001", "node001"));
  EXPECT_TRUE(NoProxyCovers("a,node001,b", "node001"));
  EXPECT_TRUE(NoProxyCovers("cluster.local", "node001.cluster.local"));
  EXPECT_TRUE(NoProxyCovers(".cluster.local", "node001.cluster.local"));
  EXPECT_TRUE(NoProxyCovers(".cluster.local", "cluster.local"));
  EXPECT_TRUE(NoProxyCovers("127.0.0.1,localhost", "127.0.0.1"));
  EXPECT_TRUE(NoProxyCovers("*", "anything.example"));
  EXPECT_TRUE(NoProxyCovers("a, *", "anything.example"));
}

TEST(Proxy, NoProxyMatchesOnDotBoundariesOnly) {
  EXPECT_FALSE(NoProxyCovers("cluster.local", "evilcluster.local"));
  EXPECT_FALSE(NoProxyCovers("node1", "node10"));
  EXPECT_FALSE(NoProxyCovers("node001.cluster.local", "node001"));
  EXPECT_FALSE(NoProxyCovers("10.0.0.1", "10.0.0.10"));
}

TEST(Proxy, NoProxyIgnoresCaseBlanksAndEmptyEntries) {
  EXPECT_TRUE(NoProxyCovers(" Node001 ", "node001"));
  EXPECT_TRUE(NoProxyCovers("NODE001", "Node001"));
  EXPECT_TRUE(NoProxyCovers(",,node001,", "node001"));
  EXPECT_TRUE(NoProxyCovers("\tnode001\n", "node001"));
  EXPECT_FALSE(NoProxyCovers("", "node001"));
  EXPECT_FALSE(NoProxyCovers(",,", "node001"));
  EXPECT_FALSE(NoProxyCovers(".", "node001"));
}

TEST(Proxy, RedactRemovesUserAndPassword) {
  EXPECT_EQ(RedactProxyCredentials("http://user:secret@proxy:3128"), "http://***@proxy:3128");
  EXPECT_EQ(RedactProxyCredentials("http://user@proxy:3128/"), "http://***@proxy:3128/");
  EXPECT_EQ(RedactProxyCredentials("socks5h://u:p@proxy"), "socks5h://***@proxy");
  EXPECT_EQ(RedactProxyCredentials("user:secret@proxy:3128"), "***@proxy:3128");
}

TEST(Proxy, RedactLeavesUrlsWithoutCredentials) {
  EXPECT_EQ(RedactProxyCredentials("http://proxy:3128"), "http://proxy:3128");
  EXPECT_EQ(RedactProxyCredentials("proxy:3128"), "proxy:3128");
  EXPECT_EQ(RedactProxyCredentials(""), "");
}

TEST(Proxy, RedactNeverLeaksAPasswordWithSpecialCharacters) {
  // Passwords with '@' or '/' are often written unencoded; no part of them may survive.
  for (const char* url :
       {"http://user:p@ss@proxy:3128", "http://user:pa/ss@proxy:3128", "http://user:p@s/s@proxy:3128/"}) {
    std::string redacted = RedactProxyCredentials(url);
    EXPECT_FALSE(Contains(redacted, "ss")) << url << " → " << redacted;
    EXPECT_FALSE(Contains(redacted, "user")) << url << " → " << redacted;
    EXPECT_TRUE(Contains(redacted, "proxy:3128")) << url << " → " << redacted;
  }
}

TEST(Proxy, NoWarningWithoutProxyVariables) {
  EXPECT_TRUE(ProxyWarnings(MakeEnv({}), "node001").empty());
  EXPECT_TRUE(ProxyWarnings(MakeEnv({{"no_proxy", "x"}}), "node001").empty());
  EXPECT_TRUE(ProxyWarnings(MakeEnv({{"http_proxy", ""}, {"https_proxy", ""}}), "node001").empty());
}

TEST(Proxy, EachProxyVariableWarns) {
  for (const char* name :
       {"grpc_proxy", "https_proxy", "http_proxy", "HTTPS_PROXY", "HTTP_PROXY", "all_proxy"}) {
    auto warnings = ProxyWarnings(MakeEnv({{name, "http://proxy:3128"}}), "node001");
    ASSERT_EQ(warnings.size(), 1u) << name;
    const std::string& w = warnings[0];
    EXPECT_TRUE(w.starts_with(std::string(name) + "='http://proxy:3128'")) << w;
    EXPECT_TRUE(Contains(w, "'node001'")) << w;
    EXPECT_TRUE(Contains(w, "no_proxy=node001")) << w;
    EXPECT_TRUE(Contains(w, std::string("unset ") + name)) << w;
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
  }
}

TEST(Proxy, OneWarningNamingTheFirstVariableGrpcReads) {
  auto warnings =
      ProxyWarnings(MakeEnv({{"http_proxy", "http://b:1"}, {"grpc_proxy", "http://a:1"}}), "node001");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_TRUE(warnings[0].starts_with("grpc_proxy=")) << warnings[0];
}

TEST(Proxy, WarningRedactsCredentials) {
  auto warnings = ProxyWarnings(MakeEnv({{"https_proxy", "http://user:secret@proxy:3128"}}), "node001");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_FALSE(Contains(warnings[0], "secret")) << warnings[0];
  EXPECT_FALSE(Contains(warnings[0], "user")) << warnings[0];
  EXPECT_TRUE(Contains(warnings[0], "http://***@proxy:3128")) << warnings[0];
}

TEST(Proxy, AnyNoProxyVariableExemptsTheHost) {
  for (const char* name : {"no_proxy", "NO_PROXY", "no_grpc_proxy"}) {
    Environment env = MakeEnv({{"https_proxy", "http://proxy:3128"}, {name, "localhost,.cluster.local"}});
    EXPECT_TRUE(ProxyWarnings(env, "node001.cluster.local").empty()) << name;
    EXPECT_EQ(ProxyWarnings(env, "node001").size(), 1u) << name;
  }
}

}  // namespace
}  // namespace distrun
