// The Host, Origin and request-target parsers (authority.h) and the RFC 9112
// head checks (request_checks.h): the exact grammar, and the values that
// used to slip through the DNS-rebinding check.
#include "transport/http/authority.h"

#include <gtest/gtest.h>

#include "transport/http/mcp_http.h"
#include "transport/http/request_checks.h"

namespace sandcastle::transport::http {
namespace {

TEST(Authority, HostAndPort) {
  auto a = parse_authority("LocalHost:8181");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 8181u);
  a = parse_authority("127.0.0.1");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "127.0.0.1");
  EXPECT_FALSE(a->port);
  a = parse_authority("[0:0:0:0:0:0:0:1]:80");  // written back canonically
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "[::1]");
  EXPECT_EQ(a->port, 80u);
  a = parse_authority("host:");  // an empty port is in the grammar
  ASSERT_TRUE(a);
  EXPECT_FALSE(a->port);
  ASSERT_TRUE(parse_authority(""));  // so is an empty reg-name
  EXPECT_TRUE(parse_authority("a-b_c~d.%41!$&'()*+,;=:65535"));
  EXPECT_TRUE(parse_authority("[v1.fe80::a+b]"));
}

TEST(Authority, RefusesWhatIsNotHostAndPort) {
  for (const char* bad : {"localhost:80@evil.com",
                          "user@localhost",
                          "localhost/evil",
                          "localhost:80/x",
                          "local host",
                          "localhost\t",
                          "localhost\r\nX: y",
                          "a:1:2",
                          "localhost:65536",
                          "localhost:123456",
                          "localhost:-1",
                          "localhost:8o",
                          "[::1",
                          "[::1]x",
                          "[::1]:x",
                          "[evil.com]",
                          "[fe80::1%25eth0]",
                          "::1",
                          "%zz",
                          "%4",
                          "a\"b",
                          "a<b",
                          "a?b",
                          "a#b",
                          "localhost, evil.com",
                          "\xc3\xa9.example"}) {
    EXPECT_FALSE(parse_authority(bad)) << bad;
  }
}

TEST(Authority, HostAllowedParsesFirst) {
  std::vector<std::string> loop = {"localhost", "127.0.0.1", "[::1]"};
  EXPECT_TRUE(host_allowed("localhost:8181", loop));
  EXPECT_TRUE(host_allowed("[0::1]:8181", loop));
  // Each of these used to pass as "localhost" or "127.0.0.1".
  EXPECT_FALSE(host_allowed("localhost:80@evil.com", loop));
  EXPECT_FALSE(host_allowed("127.0.0.1:80@evil.com:80", loop));
  EXPECT_FALSE(host_allowed("localhost, evil.com", loop));
  EXPECT_FALSE(host_allowed("[::1]evil.com", loop));
  EXPECT_FALSE(host_allowed("[::1], evil.com", loop));  // two Host fields, joined
  EXPECT_FALSE(host_allowed("localhost:", {"evil.com"}));
  EXPECT_TRUE(host_allowed("Example.COM:443", {"example.com"}));
}

TEST(Authority, Origins) {
  auto o = parse_origin("HTTPS://App.Example.com:8443");
  ASSERT_TRUE(o);
  EXPECT_EQ(o->scheme, "https");
  EXPECT_EQ(o->authority.host, "app.example.com");
  EXPECT_EQ(o->authority.port, 8443u);
  for (const char* bad :
       {"null", "http://", "http://a:", "http://localhost:80@evil.com", "http://user@localhost",
        "http://localhost/", "http://localhost/path", "http://localhost:3000 http://b",
        "localhost:3000", "://localhost", "1http://a", "http://local host"}) {
    EXPECT_FALSE(parse_origin(bad)) << bad;
  }
}

TEST(Authority, OriginChecks) {
  EXPECT_TRUE(is_loopback_origin("http://localhost:3000"));
  EXPECT_TRUE(is_loopback_origin("http://[::1]"));
  // Each of these used to pass as a loopback origin.
  EXPECT_FALSE(is_loopback_origin("http://localhost:80@evil.com"));
  EXPECT_FALSE(is_loopback_origin("http://127.0.0.1:1@evil.com"));
  EXPECT_FALSE(is_loopback_origin("http://localhost:3000/../evil"));
  EXPECT_FALSE(is_loopback_origin("ftp://localhost"));
  std::vector<std::string> allowed = {"https://app.example.com"};
  EXPECT_TRUE(origin_allowed("https://app.example.com", allowed, true));
  EXPECT_TRUE(origin_allowed("https://APP.example.com", allowed, true));
  EXPECT_FALSE(origin_allowed("http://app.example.com", allowed, true));
  EXPECT_FALSE(origin_allowed("https://app.example.com:444", allowed, true));
  EXPECT_FALSE(origin_allowed("https://app.example.com.evil.com", allowed, true));
  EXPECT_FALSE(origin_allowed("http://localhost:3000", allowed, false));
  EXPECT_TRUE(origin_allowed("http://localhost:3000", allowed, true));
  EXPECT_FALSE(origin_allowed("", allowed, true));
  EXPECT_FALSE(origin_allowed("null", allowed, true));
  EXPECT_TRUE(origin_allowed("null", {"*"}, false));
}

TEST(Authority, Targets) {
  auto t = parse_target("/mcp?x=1");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->origin_form, "/mcp?x=1");
  EXPECT_FALSE(t->authority);
  t = parse_target("HTTP://localhost:8181/mcp");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->origin_form, "/mcp");
  EXPECT_EQ(t->authority->host, "localhost");
  t = parse_target("https://[::1]?a");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->origin_form, "/?a");
  for (const char* bad :
       {"*", "localhost:8181", "mcp", "", "/mcp#frag", "ftp://localhost/x", "http:///mcp",
        "http://localhost:80@evil.com/mcp", "http://u:p@localhost/mcp"}) {
    EXPECT_FALSE(parse_target(bad)) << bad;
  }
  t = parse_target("//evil.com/x");  // origin-form: a path, not an authority
  ASSERT_TRUE(t);
  EXPECT_FALSE(t->authority);
}

RequestHead head(std::vector<std::string_view> host, std::vector<std::string_view> te = {},
                 std::string_view target = "/mcp", unsigned version = 11) {
  RequestHead h;
  h.method = "POST";
  h.target = target;
  h.version = version;
  h.host = std::move(host);
  h.transfer_encoding = std::move(te);
  return h;
}

TEST(RequestChecks, HostFieldCount) {
  EXPECT_EQ(check_request_head(head({"localhost"})).status, 0);
  EXPECT_EQ(check_request_head(head({})).status, 400);
  EXPECT_EQ(check_request_head(head({}, {}, "/mcp", 10)).status, 0);  // HTTP/1.0 may omit it
  EXPECT_EQ(check_request_head(head({"localhost", "localhost"})).status, 400);
  EXPECT_EQ(check_request_head(head({"localhost", "evil.com"}, {}, "/mcp", 10)).status, 400);
  EXPECT_EQ(check_request_head(head({"localhost:80@evil.com"})).status, 400);
  EXPECT_EQ(check_request_head(head({"evil.com"})).status,
            0);  // well-formed: the 403 is the handler's
}

TEST(RequestChecks, TargetForms) {
  auto v = check_request_head(head({"localhost"}, {}, "http://evil.com:8080/mcp?a=b"));
  EXPECT_EQ(v.status, 0);
  EXPECT_TRUE(v.absolute_form);
  EXPECT_EQ(v.target, "/mcp?a=b");
  EXPECT_EQ(v.host, "evil.com:8080");  // checked against the allowed hosts in place of Host
  EXPECT_EQ(check_request_head(head({"localhost"}, {}, "*")).status, 400);
  EXPECT_EQ(check_request_head(head({"localhost"}, {}, "localhost:80")).status, 400);
  EXPECT_EQ(check_request_head(head({"localhost"}, {}, "/mcp#x")).status, 400);
  EXPECT_EQ(check_request_head(head({"localhost"}, {}, "http://user@localhost/mcp")).status, 400);
}

TEST(RequestChecks, TransferEncodingFraming) {
  EXPECT_EQ(check_request_head(head({"h"}, {"chunked"})).status, 0);
  EXPECT_EQ(check_request_head(head({"h"}, {"Chunked"})).status, 0);
  EXPECT_EQ(check_request_head(head({"h"}, {"gzip"})).status, 400);           // length unknowable
  EXPECT_EQ(check_request_head(head({"h"}, {"chunked, gzip"})).status, 400);  // chunked not last
  EXPECT_EQ(check_request_head(head({"h"}, {"chunked", "chunked"})).status, 400);
  EXPECT_EQ(check_request_head(head({"h"}, {""})).status, 400);
  EXPECT_EQ(check_request_head(head({"h"}, {"gzip, chunked"})).status, 501);
  EXPECT_EQ(check_request_head(head({"h"}, {"gzip", "chunked"})).status, 501);
  EXPECT_EQ(check_request_head(head({"h"}, {"chunked"}, "/mcp", 10)).status, 400);  // HTTP/1.0
}

}  // namespace
}  // namespace sandcastle::transport::http
