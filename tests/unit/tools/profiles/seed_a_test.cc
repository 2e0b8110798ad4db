// seed-a (mcp-code-sandbox): E2B's log lists, the {logs, error} a run
// becomes, and where upload_file writes.
#include "tools/profiles/seed_a.h"

#include <gtest/gtest.h>

#include "tools/profiles/profiles.h"

namespace sandcastle::tools {
namespace {

using mcp::json;

TEST(SeedA, LogsAreLinesWithTheirNewlines) {
  EXPECT_EQ(seed_a::e2b_lines(""), json::array());
  EXPECT_EQ(seed_a::e2b_lines("a\nb\n"), json({"a\n", "b\n"}));
  EXPECT_EQ(seed_a::e2b_lines("a\n\nlast"), json({"a\n", "\n", "last"}));
}

TEST(SeedA, ACleanRunHasNullError) {
  service::RunResult r;
  r.stdout_data = "4\n";
  r.stderr_data = "warn\n";
  EXPECT_EQ(seed_a::execution_json(r),
            json({{"logs", {{"stdout", {"4\n"}}, {"stderr", {"warn\n"}}}}, {"error", nullptr}}));
}

TEST(SeedA, AnExceptionIsTheErrorAsTheKernelSentIt) {
  service::RunResult r;
  r.exit_code = 1;
  r.error = json{{"name", "ZeroDivisionError"}, {"value", "division by zero"}, {"traceback", "tb"}};
  EXPECT_EQ(seed_a::execution_json(r)["error"], r.error);
}

TEST(SeedA, ATracebackOfLinesIsOneString) {
  service::RunResult r;
  r.error = json{{"name", "E"}, {"value", "v"}, {"traceback", {"Traceback:", "  line 1"}}};
  EXPECT_EQ(seed_a::execution_json(r)["error"]["traceback"], "Traceback:\n  line 1");
}

TEST(SeedA, ATimeoutIsATimeoutError) {
  service::RunResult r;
  r.reason = "timeout";
  r.failed = true;
  r.stdout_data = "started\n";
  const json j = seed_a::execution_json(r);
  EXPECT_EQ(j["error"]["name"], "TimeoutError");
  EXPECT_NE(j["error"]["value"].get<std::string>().find("timeout"), std::string::npos);
  EXPECT_EQ(j["logs"]["stdout"], json({"started\n"}));
}

TEST(SeedA, ANonzeroExitWithoutExceptionSaysTheCode) {
  service::RunResult r;
  r.exit_code = 3;
  r.reason = "exited";
  EXPECT_EQ(seed_a::execution_json(r)["error"]["value"],
            "the code ended with exit code 3 (exited)");
}

TEST(SeedA, UploadDefaultsToTheWorkspace) {
  EXPECT_EQ(*seed_a::upload_path("/", "data.csv"), "/workspace/data.csv");
  EXPECT_EQ(*seed_a::upload_path("", "data.csv"), "/workspace/data.csv");
  EXPECT_EQ(*seed_a::upload_path("in", "data.csv"), "/workspace/in/data.csv");
  EXPECT_EQ(*seed_a::upload_path("/tmp/", "sub/data.csv"), "/tmp/sub/data.csv");
}

TEST(SeedA, UploadRefusesNamesThatAreNotNames) {
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", ".."}) {
    auto p = seed_a::upload_path("/", bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument) << bad;
  }
}

TEST(SeedA, UploadRefusesADestinationThatLeavesItsDirectory) {
  for (const char* bad : {"..", "../etc", "/workspace/../etc", "in/../../x", "/tmp/.."}) {
    auto p = seed_a::upload_path(bad, "data.csv");
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument) << bad;
    EXPECT_EQ(p.error().context, "destination_path '" + std::string(bad) +
                                     "' leaves its directory (\"..\"); pass the directory itself")
        << bad;
  }
  // Names that merely contain dots are names.
  EXPECT_EQ(*seed_a::upload_path("/tmp/..x/a..", "data.csv"), "/tmp/..x/a../data.csv");
}

TEST(Profiles, SeedAAndCParse) {
  EXPECT_EQ(parse_profile("seed-a"), Profile::kSeedA);
  EXPECT_EQ(parse_profile("seed-c"), Profile::kSeedC);
  EXPECT_FALSE(parse_profile("seed-z"));
}

}  // namespace
}  // namespace sandcastle::tools
