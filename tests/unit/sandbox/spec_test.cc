#include "sandbox/spec.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox {
namespace {

TEST(SandboxSpec, DefaultsAreTheDocumentedOnes) {
  SandboxSpec s = SandboxSpec::defaults();
  EXPECT_EQ(s.image(), "host");
  EXPECT_EQ(s.limits().memory_bytes, 512 * kMiB);
  EXPECT_EQ(s.limits().pids, 256u);
  EXPECT_EQ(s.workdir(), "/workspace");
  EXPECT_EQ(s.network(), NetworkMode::kNone);
  EXPECT_EQ(s.persistence(), Persistence::kEphemeral);
  auto created = SandboxSpec::create({});
  ASSERT_TRUE(created.ok());
  EXPECT_EQ(created->limits().disk_bytes, s.limits().disk_bytes);
}

Error create_error(SpecOptions o) {
  auto r = SandboxSpec::create(std::move(o));
  EXPECT_FALSE(r.ok());
  return r ? Error{} : r.error();
}

TEST(SandboxSpec, RejectsOutOfRangeLimitsWithFieldName) {
  SpecOptions o;
  o.limits.memory_bytes = 1024;
  EXPECT_EQ(create_error(o).context, "spec.limits.memory_bytes: must be at least 16 MiB");
  o = {};
  o.limits.pids = 1;
  EXPECT_EQ(create_error(o).code, ErrorCode::kInvalidArgument);
  o = {};
  o.limits.pids = 100000;
  EXPECT_NE(create_error(o).context.find("pid_max"), std::string::npos);
  o = {};
  o.limits.open_files = 30000;
  EXPECT_NE(create_error(o).context.find("open_files"), std::string::npos);
  o = {};
  o.limits.exec_timeout = std::chrono::milliseconds(0);
  EXPECT_NE(create_error(o).context.find("exec_timeout"), std::string::npos);
  o = {};
  o.limits.cpu_millis = 5;
  EXPECT_NE(create_error(o).context.find("cpu_millis"), std::string::npos);
}

TEST(SandboxSpec, RejectsBadPathsNamesAndEnv) {
  SpecOptions o;
  o.workdir = "relative";
  EXPECT_NE(create_error(o).context.find("workdir"), std::string::npos);
  o = {};
  o.workdir = "/workspace/../etc";
  EXPECT_NE(create_error(o).context.find(".."), std::string::npos);
  o = {};
  o.hostname = "bad host";
  EXPECT_NE(create_error(o).context.find("hostname"), std::string::npos);
  o = {};
  o.env = {{"1BAD", "x"}};
  EXPECT_NE(create_error(o).context.find("1BAD"), std::string::npos);
  o = {};
  o.env = {{"OK", std::string("a\0b", 3)}};
  EXPECT_NE(create_error(o).context.find("NUL"), std::string::npos);
}

TEST(SandboxSpec, EnvNames) {
  EXPECT_TRUE(valid_env_name("PATH"));
  EXPECT_TRUE(valid_env_name("_x1"));
  EXPECT_FALSE(valid_env_name(""));
  EXPECT_FALSE(valid_env_name("A=B"));
  EXPECT_FALSE(valid_env_name("9A"));
  EXPECT_EQ(base_environment().at("HOME"), "/workspace");
}

TEST(SandboxSpec, NetworkModesAndRules) {
  EXPECT_STREQ(network_mode_name(NetworkMode::kNone), "none");
  EXPECT_STREQ(network_mode_name(NetworkMode::kAllowList), "allowlist");
  EXPECT_STREQ(network_mode_name(NetworkMode::kFull), "full");
  SpecOptions o;
  o.network = NetworkMode::kAllowList;
  o.network_allow = {"allowed.test", "*.allowed.test:443", "198.51.100.2/32:7000"};
  o.network_deny = {"evil.test"};
  auto s = SandboxSpec::create(o);
  ASSERT_TRUE(s.ok()) << s.error().message();
  EXPECT_EQ(s->network_allow(), o.network_allow);
  EXPECT_EQ(s->network_deny(), o.network_deny);
  EXPECT_TRUE(SandboxSpec::defaults().network_allow().empty());
  o.network_allow.push_back("a.*.test");
  EXPECT_EQ(create_error(o).context,
            "spec.network.allow[3] \"a.*.test\": '*' only as the whole leftmost label "
            "(*.example.com)");
  o.network_allow.pop_back();
  o.network_deny = {"2001:db8::1"};
  EXPECT_EQ(create_error(o).context,
            "spec.network.deny[0] \"2001:db8::1\": an IPv6 address goes in brackets: "
            "[2001:db8::1]:443");
  o.network_deny = std::vector<std::string>(257, "a.test");
  EXPECT_EQ(create_error(o).code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandcastle::sandbox
