// Profile seed-b's pure parts: where create_file_in_container writes, which
// images the host stands in for, and execute_command_in_container's text.
#include "tools/profiles/seed_b.h"

#include <gtest/gtest.h>

namespace sandcastle::tools::seed_b {
namespace {

TEST(SeedBWorkspacePath, RelativeNamesLandUnderWorkspace) {
  EXPECT_EQ(*workspace_path("hello.py"), "/workspace/hello.py");
  EXPECT_EQ(*workspace_path("src/./main.c"), "/workspace/src/main.c");
  EXPECT_EQ(*workspace_path("a//b/"), "/workspace/a/b");
  EXPECT_EQ(*workspace_path("/workspace/x.txt"), "/workspace/x.txt");
}

// The seed joined the name to its host directory: "../x" and "/etc/x"
// escaped it. Here both are refused, saying what to give instead.
TEST(SeedBWorkspacePath, EscapesAreRefused) {
  for (const char* bad : {"../x", "a/../../x", "/etc/passwd", "/workspacex/y", "/workspace/../x"}) {
    auto p = workspace_path(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(p.error().context.find("relative to /workspace"), std::string::npos) << bad;
  }
  for (const char* empty : {"", ".", "/workspace", "./"}) {
    auto p = workspace_path(empty);
    ASSERT_FALSE(p.ok()) << empty;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(SeedBImages, HostStandsInForLanguageAndDistributionImages) {
  for (const char* img : {"python:3.9-slim", "python", "node:20", "ubuntu:latest", "debian",
                          "docker.io/library/python:3.12", "gcc:13", "python@sha256:abc"})
    EXPECT_TRUE(host_stands_in_for(img)) << img;
  for (const char* img : {"my-ds-env:v1", "postgres:16", "pythonista", "ghcr.io/x/python:1", ""})
    EXPECT_FALSE(host_stands_in_for(img)) << img;
}

TEST(SeedBCommandText, OutputThenExitCodeWhenNotZero) {
  service::RunResult r;
  r.stdout_data = "hi\n";
  r.reason = "exited";
  EXPECT_EQ(command_text(r), "hi\n");
  r.stderr_data = "warn";
  r.exit_code = 2;
  EXPECT_EQ(command_text(r), "hi\nwarn\n[exit code 2]");
  r = {};
  r.reason = "exited";
  r.exit_code = 1;
  EXPECT_EQ(command_text(r), "[exit code 1]");
}

TEST(SeedBCommandText, TimeoutSaysWhyAndWhatToDo) {
  service::RunResult r;
  r.stdout_data = "started\n";
  r.reason = "timeout";
  r.exit_code = 137;
  r.failed = true;
  r.hint = "raise timeout_s";
  EXPECT_EQ(command_text(r), "started\n[timeout: raise timeout_s]");
  r = {};
  r.signal = 9;
  r.reason = "signaled";
  EXPECT_EQ(command_text(r), "[killed by signal 9]");
}

}  // namespace
}  // namespace sandcastle::tools::seed_b
