// Engine endpoint URLs: unix sockets, tcp, tcp with a TLS directory, and
// what is refused.
#include "sandbox/engine/endpoint.h"

#include <gtest/gtest.h>

#include "sandbox/engine/engine_client.h"

namespace sandcastle::sandbox::engine {
namespace {

TEST(EngineEndpoint, UnixSocket) {
  auto ep = parse_endpoint("unix:///var/run/docker.sock");
  ASSERT_TRUE(ep.ok()) << ep.error().message();
  EXPECT_EQ(ep->kind, Endpoint::Kind::kUnix);
  EXPECT_EQ(ep->path, "/var/run/docker.sock");
  EXPECT_FALSE(ep->tls);
  EXPECT_EQ(ep->str(), "unix:///var/run/docker.sock");
}

TEST(EngineEndpoint, TcpWithAndWithoutPortAndTls) {
  auto a = parse_endpoint("tcp://Engine-1.example:2375");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->kind, Endpoint::Kind::kTcp);
  EXPECT_EQ(a->host, "engine-1.example");
  EXPECT_EQ(a->port, "2375");
  EXPECT_FALSE(a->tls);
  EXPECT_EQ(a->str(), "tcp://engine-1.example:2375");

  auto b = parse_endpoint("tcp://10.0.0.5", "/etc/sandcastle/tls");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->port, "2376");  // docker's TLS default
  EXPECT_TRUE(b->tls);
  EXPECT_EQ(b->tls_dir, "/etc/sandcastle/tls");

  auto c = parse_endpoint("tcp://10.0.0.5/");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, "2375");

  auto v6 = parse_endpoint("tcp://[::1]:2376", "/d");
  ASSERT_TRUE(v6.ok()) << v6.error().message();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->str(), "tcp://[::1]:2376");
}

TEST(EngineEndpoint, Refused) {
  const std::string long_path = "unix:///" + std::string(120, 'a');
  for (const char* bad :
       {"", "docker.sock", "http://host:2375", "unix://relative.sock", "unix://", "tcp://",
        "tcp://host:", "tcp://host:0", "tcp://host:65536", "tcp://host:12x",
        "tcp://host:2375/v1.41", "tcp://user@host:2375", "tcp://ho st:1", "tcp://[::1",
        "tcp://[::1]x", "tcp://a:b:c", long_path.c_str()}) {
    auto ep = parse_endpoint(bad);
    ASSERT_FALSE(ep.ok()) << bad;
    EXPECT_EQ(ep.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(ep.error().context.find("engine endpoint"), std::string::npos) << bad;
  }
  auto tls_unix = parse_endpoint("unix:///run/x.sock", "/tls");
  ASSERT_FALSE(tls_unix.ok());
  EXPECT_NE(tls_unix.error().context.find("tcp:// endpoints only"), std::string::npos);
}

TEST(EngineEndpoint, HttpStatusAndQueryEscape) {
  Error e = Error::make(ErrorCode::kNotFound,
                        "engine unix:///x: GET /v1.41/images/x/json: HTTP 404: No such image: x");
  EXPECT_EQ(engine_http_status(e), 404);
  EXPECT_EQ(engine_http_status(Error::make(ErrorCode::kIo, "no status here")), 0);
  EXPECT_EQ(query_escape("/tmp/a b&c=d?é"), "%2Ftmp%2Fa%20b%26c%3Dd%3F%C3%A9");
}

}  // namespace
}  // namespace sandcastle::sandbox::engine
