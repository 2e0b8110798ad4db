#include "config/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace sandcastle::config {
namespace {

std::string write_file(const std::string& text) {
  static int n = 0;
  auto p = std::filesystem::temp_directory_path() /
           ("sc-config-" + std::to_string(getpid()) + "-" + std::to_string(++n) + ".toml");
  std::ofstream(p) << text;
  return p.string();
}

TEST(Config, DefaultsAreSafe) {
  Loader l;
  EXPECT_EQ(l.config().host, "127.0.0.1");
  EXPECT_EQ(l.config().port, 8181);
  EXPECT_EQ(l.config().transport, "stdio");
  EXPECT_FALSE(l.config().auth_enabled);
  EXPECT_TRUE(l.validate().ok());
}

TEST(Config, FileThenEnvThenFlags) {
  Loader l;
  auto path = write_file(R"(state_dir = "/tmp/x"
[server]
host = "0.0.0.0"
port = 9000
[auth]
enabled = true
[http]
allowed_origins = ["https://a.example", "https://b.example"]
[limits]
memory_mb = 1024
[packages]
pip_index_url = "http://127.0.0.1:3141/simple"
)");
  ASSERT_TRUE(l.load_file(path).ok());
  EXPECT_EQ(l.config().host, "0.0.0.0");
  EXPECT_EQ(l.config().port, 9000);
  EXPECT_TRUE(l.config().auth_enabled);
  EXPECT_EQ(l.config().allowed_origins.size(), 2u);
  EXPECT_EQ(l.config().memory_mb, 1024);
  EXPECT_EQ(l.config().state_dir, "/tmp/x");
  EXPECT_EQ(l.source_of("server.port"), Source::kFile);
  ASSERT_TRUE(l.load_env({{"SANDCASTLE_SERVER_PORT", "9100"}, {"SANDCASTLE_UNRELATED", "x"}}).ok());
  EXPECT_EQ(l.config().port, 9100);
  EXPECT_EQ(l.source_of("server.port"), Source::kEnv);
  ASSERT_TRUE(l.set("server.port", "9200").ok());
  EXPECT_EQ(l.config().port, 9200);
  EXPECT_EQ(l.source_of("server.port"), Source::kFlag);
  ASSERT_TRUE(l.set("http.cors_origins", "https://x,https://y").ok());
  EXPECT_EQ(l.config().cors_origins, (std::vector<std::string>{"https://x", "https://y"}));
  std::string shown = l.show();
  EXPECT_NE(shown.find("[server]\n"), std::string::npos) << shown;
  EXPECT_NE(shown.find("port = 9200  # flag"), std::string::npos) << shown;
  EXPECT_NE(shown.find("host = \"0.0.0.0\"  # config file"), std::string::npos) << shown;
  std::filesystem::remove(path);
}

TEST(Config, UnknownKeyNamesKeyAndLine) {
  Loader l;
  auto path = write_file("[server]\nhost = \"127.0.0.1\"\nprot = 1\n");
  auto s = l.load_file(path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().context.find(":3: unknown key 'server.prot'"), std::string::npos) << s.error().context;
  std::filesystem::remove(path);
}

TEST(Config, UnknownSectionAndWrongTypes) {
  Loader l;
  auto p1 = write_file("[servre]\nport = 1\n");
  auto s1 = l.load_file(p1);
  ASSERT_FALSE(s1.ok());
  EXPECT_NE(s1.error().context.find("unknown section [servre]"), std::string::npos) << s1.error().context;
  auto p2 = write_file("\n[server]\nport = \"8181\"\n");
  auto s2 = l.load_file(p2);
  ASSERT_FALSE(s2.ok());
  EXPECT_NE(s2.error().context.find(":3: 'server.port' must be an integer"), std::string::npos) << s2.error().context;
  auto p3 = write_file("[http]\nallowed_origins = [1]\n");
  auto s3 = l.load_file(p3);
  ASSERT_FALSE(s3.ok());
  EXPECT_NE(s3.error().context.find("'http.allowed_origins' must be a array of strings"), std::string::npos);
  auto p4 = write_file("[server]\nport = 70000\n");
  auto s4 = l.load_file(p4);
  ASSERT_FALSE(s4.ok());
  EXPECT_NE(s4.error().context.find("between 0 and 65535"), std::string::npos) << s4.error().context;
  auto p5 = write_file("[server\n");
  auto s5 = l.load_file(p5);
  ASSERT_FALSE(s5.ok());
  EXPECT_NE(s5.error().context.find(":1:"), std::string::npos) << s5.error().context;
  for (auto& p : {p1, p2, p3, p4, p5}) std::filesystem::remove(p);
}

TEST(Config, BadFlagAndEnvValues) {
  Loader l;
  auto s = l.set("server.port", "80a");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().context.find("must be an integer"), std::string::npos);
  auto e = l.load_env({{"SANDCASTLE_AUTH_ENABLED", "maybe"}});
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().context.find("SANDCASTLE_AUTH_ENABLED"), std::string::npos) << e.error().context;
  EXPECT_FALSE(l.set("nope.key", "1").ok());
  ASSERT_TRUE(l.set("server.transport", "carrier-pigeon").ok());
  EXPECT_FALSE(l.validate().ok());
  EXPECT_EQ(env_name("limits.memory_mb"), "SANDCASTLE_LIMITS_MEMORY_MB");
}

}  // namespace
}  // namespace sandcastle::config
