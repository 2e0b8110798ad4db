// Ported from the old EgressProxy tests: index URLs to host:port, and the
// host's proxy settings read as curl reads them.
#include "net/upstream.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/base64.h"

namespace sandcastle::net {
namespace {

TEST(RuleFromUrl, TakesTheHostAndPortOfAnIndexUrl) {
  EXPECT_EQ(*rule_from_url("https://pypi.org/simple"), (HostPort{"pypi.org", 443}));
  EXPECT_EQ(*rule_from_url("http://127.0.0.1:8080/simple/"), (HostPort{"127.0.0.1", 8080}));
  EXPECT_EQ(*rule_from_url("https://registry.npmjs.org"), (HostPort{"registry.npmjs.org", 443}));
  EXPECT_EQ(*rule_from_url("http://[::1]:81/x"), (HostPort{"::1", 81}));
  EXPECT_FALSE(rule_from_url("ftp://x").ok());
  EXPECT_FALSE(rule_from_url("pypi.org").ok());
  EXPECT_FALSE(rule_from_url("http://h:99999/").ok());
}

std::function<const char*(const char*)> env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    static thread_local std::string v;
    auto it = vars.find(name);
    if (it == vars.end()) return nullptr;
    v = it->second;
    return v.c_str();
  };
}

TEST(UpstreamProxies, ReadsTheHostsSettingsLikeCurl) {
  std::vector<std::string> warnings;
  auto p = UpstreamProxies::from_env(
      env_of({{"https_proxy", "http://u%40corp:p%3Ass@proxy.corp:3128"},
              {"HTTPS_PROXY", "http://ignored:1"},
              {"HTTP_PROXY", "proxy.corp"},
              {"NO_PROXY", " .internal.org, localhost ,10.0.0.5:443,[::1]"}}),
      &warnings);
  ASSERT_TRUE(p.https && p.http);
  EXPECT_EQ(p.https->host, "proxy.corp");
  EXPECT_EQ(p.https->port, 3128);
  EXPECT_EQ(p.https->authorization, "Basic " + base64_encode("u@corp:p:ss"));
  EXPECT_EQ(p.http->port, 80);
  EXPECT_EQ(p.http->authorization, "");
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(p.route(true, "pypi.org"), &*p.https);
  EXPECT_EQ(p.route(false, "pypi.org"), &*p.http);
  EXPECT_EQ(p.route(true, "internal.org"), nullptr);
  EXPECT_EQ(p.route(true, "pkgs.INTERNAL.org"), nullptr);
  EXPECT_NE(p.route(true, "notinternal.org"), nullptr);
  EXPECT_EQ(p.route(true, "localhost"), nullptr);
  EXPECT_EQ(p.route(true, "10.0.0.5"), nullptr);
  EXPECT_EQ(p.route(true, "::1"), nullptr);
  EXPECT_NE(p.route(true, "127.0.0.1"), nullptr);  // only what NO_PROXY names
  EXPECT_EQ(UpstreamProxies::from_env(env_of({{"https_proxy", "http://p:1"}, {"no_proxy", "*"}}))
                .route(true, "x"),
            nullptr);
}

TEST(UpstreamProxies, UnusableSettingsAreNamedWithoutTheirValue) {
  std::vector<std::string> warnings;
  auto p = UpstreamProxies::from_env(env_of({{"HTTPS_PROXY", "https://user:secret@proxy:443"},
                                             {"http_proxy", "http://proxy:99999"}}),
                                     &warnings);
  EXPECT_FALSE(p.https);
  EXPECT_FALSE(p.http);
  ASSERT_EQ(warnings.size(), 2U);
  for (const auto& w : warnings) EXPECT_EQ(w.find("secret"), std::string::npos) << w;
  EXPECT_EQ(p.route(true, "pypi.org"), nullptr);
}

}  // namespace
}  // namespace sandcastle::net
