// --engine / sandbox.engine as a list of engines (multi_engine.h).
#include <gtest/gtest.h>

#include "sandbox/engine/multi_engine.h"

namespace sandcastle::sandbox::engine {
namespace {

TEST(EngineList, NamedAndUnnamedEntriesWithTlsDirs) {
  auto l = parse_engine_list("unix:///run/docker.sock,b2=tcp://build-2:2376\ntcp://build-3:2376",
                             "/etc/certs/all,b2=/etc/certs/b2", 5);
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ(l->size(), 3u);
  EXPECT_EQ((*l)[0].name, "engine1");
  EXPECT_EQ((*l)[0].url, "unix:///run/docker.sock");
  EXPECT_EQ((*l)[0].tls_dir, "");  // a unix socket takes no TLS directory
  EXPECT_EQ((*l)[1].name, "b2");
  EXPECT_EQ((*l)[1].tls_dir, "/etc/certs/b2");  // its own wins over the shared one
  EXPECT_EQ((*l)[2].name, "engine3");
  EXPECT_EQ((*l)[2].tls_dir, "/etc/certs/all");
  EXPECT_EQ((*l)[2].capacity, 5u);
}

TEST(EngineList, EmptyIsNoEngine) {
  auto l = parse_engine_list("", "");
  ASSERT_TRUE(l.ok());
  EXPECT_TRUE(l->empty());
}

TEST(EngineList, RefusesDuplicatesBadNamesAndUnknownTlsNames) {
  auto dup = parse_engine_list("a=unix:///x,a=unix:///y", "");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().context.find("'a' is used twice"), std::string::npos);
  auto bad = parse_engine_list("a b=unix:///x", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  auto empty = parse_engine_list("a=", "");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().context.find("has no URL"), std::string::npos);
  auto tls = parse_engine_list("a=tcp://h:2376", "b=/etc/certs");
  ASSERT_FALSE(tls.ok());
  EXPECT_NE(tls.error().context.find("no engine is named 'b'"), std::string::npos);
}

TEST(EngineList, TheBackendRefusesABadUrlNamingTheEngine) {
  MultiEngineOptions o;
  o.engines = {{"x", "http://nope", "", 0}};
  auto b = MultiEngineBackend::create(o);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(b.error().context.rfind("engine x: ", 0), 0u) << b.error().context;
  o.engines = {{"a b", "unix:///x.sock", "", 0}};
  auto named = MultiEngineBackend::create(o);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.error().context.find("engine name 'a b'"), std::string::npos);
}

}  // namespace
}  // namespace sandcastle::sandbox::engine
