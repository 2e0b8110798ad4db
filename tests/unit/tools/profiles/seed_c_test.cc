// seed-c (code-sandbox-mcp): a run as the seed's text, and the
// sandbox://environments resource.
#include "tools/profiles/seed_c.h"

#include <gtest/gtest.h>

namespace sandcastle::tools {
namespace {

using mcp::json;

TEST(SeedC, OutputIsTrimmedStdout) {
  service::RunResult r;
  r.stdout_data = "\n Hello, World!\n\n";
  EXPECT_EQ(seed_c::result_text(r, "python"), "Hello, World!");
  EXPECT_FALSE(seed_c::failed(r));
}

TEST(SeedC, NoOutputSaysSoWithTheRealExitCode) {
  service::RunResult r;
  EXPECT_EQ(json::parse(seed_c::result_text(r, "python")),
            json({{"exit_code", 0}, {"stderr", "No output, forgot print()?"}, {"stdout", ""}}));
  EXPECT_EQ(json::parse(seed_c::result_text(r, "javascript"))["stderr"],
            "No output, forgot console.logs?");
}

TEST(SeedC, AFailureIsIndentedJsonWithStdoutKept) {
  service::RunResult r;
  r.exit_code = 2;
  r.stdout_data = "partial\n";
  r.stderr_data = "Traceback...\nValueError: bad\n";
  const std::string text = seed_c::result_text(r, "python");
  EXPECT_EQ(text,
            "{\n  \"exit_code\": 2,\n  \"stderr\": \"Traceback...\\nValueError: bad\",\n"
            "  \"stdout\": \"partial\"\n}");
  EXPECT_TRUE(seed_c::failed(r));
}

TEST(SeedC, ATimeoutSaysSoAndIsNeverExitCodeZero) {
  service::RunResult r;
  r.reason = "timeout";
  r.failed = true;
  r.signal = 9;
  const json j = json::parse(seed_c::result_text(r, "python"));
  EXPECT_EQ(j["exit_code"], 137);
  EXPECT_NE(j["stderr"].get<std::string>().find("30 s timeout"), std::string::npos);
}

TEST(SeedC, EnvironmentsNameEachLanguagesImage) {
  service::Config config;
  config.language_images["javascript"] = "node-img";
  const json env = seed_c::environments(config);
  EXPECT_EQ(env["python"]["image"], "host");
  EXPECT_EQ(env["javascript"]["image"], "node-img");
  EXPECT_TRUE(env["python"]["installed_libraries"].is_string());
}

}  // namespace
}  // namespace sandcastle::tools
