// [[engines]] in config.toml: several engines of the engine backend.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/config.h"

namespace sandcastle::config {
namespace {

std::string write_toml(const std::string& text) {
  static int n = 0;
  auto p = std::filesystem::temp_directory_path() /
           ("sc-engines-" + std::to_string(getpid()) + "-" + std::to_string(++n) + ".toml");
  std::ofstream(p) << text;
  return p.string();
}

TEST(EnginesConfig, ArrayOfTablesIsRead) {
  Loader l;
  auto path = write_toml(R"([sandbox]
backend = "engine"

[[engines]]
name = "here"
url = "unix:///run/podman/podman.sock"
capacity = 20

[[engines]]
url = "tcp://build-2.example:2376"
tls_dir = "/etc/sandcastle/build-2"
)");
  auto st = l.load_file(path);
  ASSERT_TRUE(st.ok()) << st.error().message();
  const auto& e = l.config().engines;
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].name, "here");
  EXPECT_EQ(e[0].url, "unix:///run/podman/podman.sock");
  EXPECT_EQ(e[0].capacity, 20);
  EXPECT_EQ(e[1].name, "engine2");  // named by position
  EXPECT_EQ(e[1].tls_dir, "/etc/sandcastle/build-2");
  EXPECT_EQ(e[1].capacity, 0);
  EXPECT_EQ(l.config().backend, "engine");
  EXPECT_NE(l.show().find("[[engines]]"), std::string::npos);
  EXPECT_NE(l.show_json().find("build-2.example"), std::string::npos);
}

TEST(EnginesConfig, BadEntriesNameTheLineAndKey) {
  struct Case {
    const char* toml;
    const char* expect;
  };
  const Case cases[] = {
      {"[[engines]]\nname = \"a\"\n", ":1: [[engines]] needs a 'url'"},
      {"[[engines]]\nurl = \"unix:///x\"\nport = 3\n", "unknown key 'port'"},
      {"[[engines]]\nurl = \"unix:///x\"\ncapacity = -1\n", "'capacity' must be an integer"},
      {"[[engines]]\nurl = 5\n", "'url' must be a string"},
      {"engines = [\"unix:///x\"]\n", "'engines' must be an array of tables"},
      {"[[engines]]\nname = \"a\"\nurl = \"unix:///x\"\n[[engines]]\nname = \"a\"\nurl = "
       "\"unix:///y\"\n",
       "name 'a' is used twice"},
  };
  for (const auto& c : cases) {
    Loader l;
    auto st = l.load_file(write_toml(c.toml));
    ASSERT_FALSE(st.ok()) << c.toml;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.error().context.find(c.expect), std::string::npos) << st.error().context;
  }
}

}  // namespace
}  // namespace sandcastle::config
