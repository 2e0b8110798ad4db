// GET /, the OAuth discovery answers, and the client configuration printed
// at start: what a newcomer (or an OAuth client without a key) is told.
#include "transport/http/landing.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "transport/http/client_config.h"

namespace sandcastle::transport::http {
namespace {

Request get(const std::string& path, const std::string& accept = "",
            const std::string& host = "127.0.0.1:8181") {
  Request r;
  r.method = "GET";
  r.path = path;
  r.target = path;
  r.headers["host"] = host;
  if (!accept.empty()) r.headers["accept"] = accept;
  return r;
}

std::string header(const Response& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return {};
}

LandingInfo info(bool auth = false) {
  LandingInfo i;
  i.version = "9.9.9";
  i.auth_required = auth;
  return i;
}

TEST(Landing, RootAnswersJsonNamingTheEndpoints) {
  auto r = public_answer(get("/", "application/json"), info());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(*r, "Content-Type"), "application/json");
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["name"], "sandcastle");
  EXPECT_EQ(j["version"], "9.9.9");
  EXPECT_EQ(j["mcp"]["endpoint"], "/mcp");
  EXPECT_EQ(j["mcp"]["url"], "http://127.0.0.1:8181/mcp");
  EXPECT_EQ(j["legacy_sse"]["endpoint"], "/sse");
  EXPECT_EQ(j["health"], "/healthz");
  EXPECT_TRUE(j.contains("docs"));
  EXPECT_EQ(j["clients"]["http"]["mcpServers"]["sandcastle"]["url"], "http://127.0.0.1:8181/mcp");
  // No Accept at all is a program too.
  EXPECT_EQ(header(*public_answer(get("/"), info()), "Content-Type"), "application/json");
}

TEST(Landing, RootAnswersHtmlToBrowsersWithThePageHeaders) {
  auto r = public_answer(get("/", "text/html,application/xhtml+xml,*/*;q=0.8"), info(true));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(header(*r, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(r->body.find("http://127.0.0.1:8181/mcp"), std::string::npos);
  EXPECT_NE(r->body.find("API key required"), std::string::npos);
  EXPECT_NE(r->body.find("Bearer &lt;your key&gt;"), std::string::npos);
  EXPECT_EQ(header(*r, "X-Content-Type-Options"), "nosniff");
  EXPECT_NE(header(*r, "Content-Security-Policy").find("default-src 'none'"), std::string::npos);
  EXPECT_EQ(header(*r, "X-Frame-Options"), "DENY");
  EXPECT_EQ(header(*r, "Referrer-Policy"), "no-referrer");
  EXPECT_EQ(header(*r, "Cache-Control"), "no-store");
}

TEST(Landing, HostIsEscapedAndPublicUrlWins) {
  // A reg-name may hold sub-delims: ' ( ) & ... never markup once escaped.
  auto r = public_answer(get("/", "text/html", "a'b&c"), info());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->body.find("a'b&c"), std::string::npos);
  EXPECT_NE(r->body.find("a&#39;b&amp;c"), std::string::npos);
  LandingInfo i = info();
  i.public_url = "https://sandbox.example.com/";
  auto j = nlohmann::json::parse(public_answer(get("/"), i)->body);
  EXPECT_EQ(j["mcp"]["url"], "https://sandbox.example.com/mcp");
}

TEST(Landing, OAuthDiscoveryGetsA404WithTheApiKeyHint) {
  for (const char* p :
       {"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}) {
    auto r = public_answer(get(p), info(true));
    ASSERT_TRUE(r.has_value()) << p;
    EXPECT_EQ(r->status, 404) << p;
    auto j = nlohmann::json::parse(r->body);
    EXPECT_NE(j["error_description"].get<std::string>().find("sandcastle keys create"),
              std::string::npos);
  }
}

TEST(Landing, RegistrationIsRefusedWithA403NotA401Or404) {
  Request reg = get("/register");
  reg.method = "POST";
  auto r = public_answer(reg, info(true));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 403);
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["error"], "access_denied");
  // mcp-remote restarts its sign-in on "Unauthorized" and switches transport
  // on "404"/"Not Found" in an error's message: the hint says neither.
  const std::string hint = api_key_hint();
  for (const char* w : {"Unauthorized", "404", "Not Found", "405"})
    EXPECT_EQ(hint.find(w), std::string::npos) << w;
  EXPECT_EQ(public_answer(get("/authorize"), info(true))->status, 403);
}

TEST(Landing, OtherPathsAreNotPublic) {
  EXPECT_FALSE(public_answer(get("/mcp"), info()).has_value());
  EXPECT_FALSE(public_answer(get("/metrics"), info()).has_value());
  EXPECT_FALSE(public_answer(get("/register"), info()).has_value());  // GET: not the OAuth endpoint
  Request post_root = get("/");
  post_root.method = "POST";
  EXPECT_FALSE(public_answer(post_root, info()).has_value());
}

TEST(ClientConfig, EveryJsonLineParsesAndCarriesTheKeyPlaceholderWhenKeysAreOn) {
  ClientEndpoint e{"http://127.0.0.1:8181/mcp", true, true};
  std::string text = startup_client_text(e, "http://127.0.0.1:8181", "/opt/sc/sandcastle");
  std::istringstream in(text);
  std::string line;
  int docs = 0;
  while (std::getline(in, line)) {
    auto b = line.find_first_not_of(' ');
    if (b == std::string::npos || line[b] != '{') continue;
    auto j = nlohmann::json::parse(line.substr(b));
    ASSERT_TRUE(j["mcpServers"].contains("sandcastle")) << line;
    ++docs;
  }
  EXPECT_EQ(docs, 3);
  auto http = http_client_config(e);
  EXPECT_EQ(http["mcpServers"]["sandcastle"]["headers"]["Authorization"], "Bearer <your key>");
  auto bridge = bridge_client_config(e);
  auto args = bridge["mcpServers"]["sandcastle"]["args"];
  EXPECT_EQ(args[1], "mcp-remote");
  EXPECT_EQ(args.back(), "Authorization: Bearer <your key>");
  EXPECT_NE(
      text.find("claude mcp add --transport http sandcastle http://127.0.0.1:8181/mcp --header "
                "'Authorization: Bearer <your key>'"),
      std::string::npos);
  EXPECT_NE(text.find("claude mcp add sandcastle -- /opt/sc/sandcastle"), std::string::npos);
  EXPECT_NE(text.find("sandcastle keys create"), std::string::npos);
}

TEST(ClientConfig, NoKeyNoHeaderAndPlainHttpElsewhereNeedsAllowHttp) {
  ClientEndpoint e{"http://10.0.0.5:8181/mcp", false, false};
  EXPECT_FALSE(http_client_config(e)["mcpServers"]["sandcastle"].contains("headers"));
  auto args = bridge_client_config(e)["mcpServers"]["sandcastle"]["args"];
  EXPECT_EQ(args.back(), "--allow-http");
  EXPECT_EQ(startup_client_text(e, "http://10.0.0.5:8181", "").find("stdio"), std::string::npos);
}

TEST(ClientConfig, ShellQuote) {
  EXPECT_EQ(shell_quote("/usr/bin/sandcastle"), "/usr/bin/sandcastle");
  EXPECT_EQ(shell_quote("a b"), "'a b'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
}

}  // namespace
}  // namespace sandcastle::transport::http
