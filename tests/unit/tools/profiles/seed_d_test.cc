// Profile seed-d's pure parts: execute_python_code's result, the install
// states and where upload_file_to_sandbox puts a file.
#include "tools/profiles/seed_d.h"

#include <gtest/gtest.h>

namespace sandcastle::tools::seed_d {
namespace {

using mcp::json;

TEST(SeedDPythonResult, TheSeedsFiveFields) {
  service::RunResult r;
  r.stdout_data = "4\n";
  r.files_created = std::vector<service::CreatedFile>{
      {"plot.png", 10, "image/png", "created", "sandbox://sb-1/plot.png", "http://h/files/x"},
      {"data.csv", 3, "text/csv", "created", "sandbox://sb-1/data.csv", ""}};
  json j = python_result(r);
  EXPECT_EQ(j, (json{{"stdout", "4\n"},
                     {"stderr", ""},
                     {"exit_code", 0},
                     {"files", {"plot.png", "data.csv"}},
                     {"file_links", {"http://h/files/x", "sandbox://sb-1/data.csv"}}}));
}

// The kernel reports an exception apart; a script would have printed it.
TEST(SeedDPythonResult, ExceptionTracebackGoesToStderr) {
  service::RunResult r;
  r.exit_code = 1;
  r.error = json{
      {"name", "ZeroDivisionError"},
      {"value", "division by zero"},
      {"traceback", {"Traceback (most recent call last):", "ZeroDivisionError: division by zero"}}};
  json j = python_result(r);
  EXPECT_EQ(j["exit_code"], 1);
  EXPECT_EQ(j["stderr"],
            "Traceback (most recent call last):\nZeroDivisionError: division by zero\n");
  // Already on stderr: not twice.
  r.stderr_data = j["stderr"];
  EXPECT_EQ(python_result(r)["stderr"], r.stderr_data);
  r.stderr_data.clear();
  r.error = json{{"name", "ValueError"}, {"value", "bad"}};
  EXPECT_EQ(python_result(r)["stderr"], "ValueError: bad\n");
}

TEST(SeedDInstallState, EachStatusInTheSeedsShape) {
  json ok = install_state("numpy", {{"status", "success"}, {"version", "2.1.0"}});
  EXPECT_EQ(ok, (json{{"status", "success"},
                      {"message", "Successfully installed numpy"},
                      {"complete", true},
                      {"success", true},
                      {"version", "2.1.0"}}));
  json failed =
      install_state("nope-pkg", {{"status", "failed"}, {"error", "package_not_found: x"}});
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["success"], false);
  EXPECT_EQ(failed["stderr"], "package_not_found: x");
  EXPECT_EQ(failed["message"], "Failed to install nope-pkg: package_not_found: x");
  json busy = install_state("pandas", {{"status", "installing"}});
  EXPECT_EQ(busy["complete"], false);
  EXPECT_TRUE(busy["success"].is_null());
  EXPECT_NE(busy["message"].get<std::string>().find("check_package_installation_status"),
            std::string::npos);
  json none = install_state("scipy", {{"status", "not_found"}});
  EXPECT_EQ(none["status"], "not_found");
  EXPECT_EQ(none["success"], false);
  EXPECT_NE(none["message"].get<std::string>().find("install_package_in_sandbox"),
            std::string::npos);
}

TEST(SeedDInstallState, ASecondInstallWhileOneRunsIsTheInstallingAnswer) {
  json same = busy_state("numpy", "numpy");
  EXPECT_EQ(same, install_state("numpy", {{"status", "installing"}}));
  json other = busy_state("pandas", "numpy");
  EXPECT_EQ(other["status"], "installing");
  EXPECT_EQ(other["complete"], false);
  EXPECT_TRUE(other["success"].is_null());
  EXPECT_EQ(other["message"],
            "Installation of numpy is in progress in this sandbox; wait for it with "
            "check_package_installation_status, then install pandas (one install at a time per "
            "sandbox)");
}

TEST(SeedDUploadTarget, SeedsResultsFolderIsTheWorkspace) {
  EXPECT_EQ(upload_target("/app/results", "a.csv"), "/workspace/a.csv");
  EXPECT_EQ(upload_target("/app/results/", "a.csv"), "/workspace/a.csv");
  EXPECT_EQ(upload_target("/app/results/in", "a.csv"), "/workspace/in/a.csv");
  EXPECT_EQ(upload_target("", "a.csv"), "/workspace/a.csv");
  EXPECT_EQ(upload_target("/tmp", "a.csv"), "/tmp/a.csv");
  EXPECT_EQ(upload_target("data", "a.csv"), "data/a.csv");
  EXPECT_EQ(upload_target("/", "a.csv"), "/a.csv");
  EXPECT_EQ(upload_target("/app/resultsx", "a.csv"), "/app/resultsx/a.csv");
}

}  // namespace
}  // namespace sandcastle::tools::seed_d
