// run_result_json: a RunResult as the tools' structured result, field by
// field, images inline or pointing to their content blocks.
#include <gtest/gtest.h>

#include "service/runs.h"

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

RunResult kernel_run() {
  RunResult r;
  r.stdout_data = "out";
  r.stderr_data = "err";
  r.exit_code = 1;
  r.signal = 0;
  r.duration = 1500us;
  r.truncated = true;
  r.stdout_bytes = 3;
  r.stderr_bytes = 3;
  r.reason = "exited";
  r.mode = "kernel";
  r.language = "python";
  r.sandbox_id = "sb-1";
  r.execution_count = 7;
  r.kernel = KernelInfo{false, true, false, "SIGKILL"};
  r.result = mime_bundle_of(json{{"text/plain", "<Figure>"}, {"image/png", "iVBORw0K"}});
  r.error = json{{"name", "ValueError"}, {"value", "bad"}, {"traceback", json::array()}};
  r.displays.push_back(mime_bundle_of(json{{"image/svg+xml", "<svg/>"}}));
  r.files_created = std::vector<CreatedFile>{
      {"a.txt", 4, "text/plain", "created", "sandbox://sb-1/a.txt", "http://x/files/a.txt"},
      {"b.bin", 2, "application/octet-stream", "modified", "sandbox://sb-1/b.bin", ""}};
  r.files_created_total = 1500;
  r.queued_ms = 12.5;
  r.hint = "do this";
  r.state_lost = true;
  return r;
}

TEST(RunResultJson, EveryFieldOfAKernelRun) {
  const json j = run_result_json(kernel_run());
  const json want{
      {"stdout", "out"},
      {"stderr", "err"},
      {"exit_code", 1},
      {"signal", 0},
      {"duration_ms", 1.5},
      {"truncated", true},
      {"stdout_bytes", 3},
      {"stderr_bytes", 3},
      {"reason", "exited"},
      {"stage", "run"},
      {"mode", "kernel"},
      {"language", "python"},
      {"sandbox_id", "sb-1"},
      {"execution_count", 7},
      {"kernel",
       {{"state_lost", false}, {"restarted", true}, {"fresh", false}, {"death", "SIGKILL"}}},
      {"result", {{"text/plain", "<Figure>"}, {"image/png", "iVBORw0K"}}},
      {"error", {{"name", "ValueError"}, {"value", "bad"}, {"traceback", json::array()}}},
      {"displays", json::array({{{"image/svg+xml", "PHN2Zy8+"}}})},  // SVG text, base64
      {"files_created", json::array({{{"path", "a.txt"},
                                      {"size", 4},
                                      {"mime_type", "text/plain"},
                                      {"status", "created"},
                                      {"uri", "sandbox://sb-1/a.txt"},
                                      {"url", "http://x/files/a.txt"}},
                                     {{"path", "b.bin"},
                                      {"size", 2},
                                      {"mime_type", "application/octet-stream"},
                                      {"status", "modified"},
                                      {"uri", "sandbox://sb-1/b.bin"}}})},
      {"files_created_total", 1500},
      {"files_created_truncated", true},
      {"queued_ms", 12.5},
      {"hint", "do this"},
      {"state_lost", true}};
  EXPECT_EQ(j, want) << j.dump(2);
}

TEST(RunResultJson, ImagesAsContentIndicesInResultThenDisplayOrder) {
  RunResult r = kernel_run();
  r.displays.push_back(mime_bundle_of(json{{"image/png", "QUJD"}, {"text/html", "<b>"}}));
  const json j = run_result_json(r, ImageForm::kContentIndex, 1);
  EXPECT_EQ(j["result"]["image/png"], (json{{"content_index", 1}, {"bytes", 6}}));
  EXPECT_EQ(j["result"]["text/plain"], "<Figure>");
  EXPECT_EQ(j["displays"][0]["image/svg+xml"], (json{{"content_index", 2}, {"bytes", 6}}));
  EXPECT_EQ(j["displays"][1]["image/png"], (json{{"content_index", 3}, {"bytes", 3}}));
  EXPECT_EQ(j["displays"][1]["text/html"], "<b>");
  EXPECT_EQ(r.image_count(), 3u);
}

// A process that ran past its timeout: the process's own measures, no
// kernel fields, a failure with a hint.
TEST(RunResultJson, TimedOutProcess) {
  RunResult r;
  r.stdout_data = "partial";
  r.exit_code = 137;
  r.signal = 9;
  r.duration = 2'000'000us;
  r.cpu_time = 250us;
  r.peak_memory_bytes = 4096;
  r.stdout_bytes = 7;
  r.reason = "timeout";
  r.mode = "process";
  r.sandbox_id = "sb-2";
  r.files_created.emplace();
  r.hint = "the command ran past its 2 s timeout and was killed";
  r.failed = true;
  EXPECT_TRUE(r.timed_out());
  const json j = run_result_json(r);
  const json want{{"stdout", "partial"},
                  {"stderr", ""},
                  {"exit_code", 137},
                  {"signal", 9},
                  {"duration_ms", 2000.0},
                  {"cpu_time_ms", 0.25},
                  {"peak_memory_bytes", 4096},
                  {"truncated", false},
                  {"stdout_bytes", 7},
                  {"stderr_bytes", 0},
                  {"reason", "timeout"},
                  {"stage", "run"},
                  {"mode", "process"},
                  {"sandbox_id", "sb-2"},
                  {"files_created", json::array()},
                  {"hint", "the command ran past its 2 s timeout and was killed"}};
  EXPECT_EQ(j, want) << j.dump(2);
}

// A compile error in a one-shot run: stage "compile", no mode, no
// files_created, sandbox_id null.
TEST(RunResultJson, CompileErrorOfAOneShotRun) {
  RunResult r;
  r.stderr_data = "main.c:1: error";
  r.exit_code = 1;
  r.stderr_bytes = 15;
  r.reason = "exited";
  r.stage = "compile";
  r.language = "c";
  r.failed = true;
  const json j = run_result_json(r);
  EXPECT_EQ(j["stage"], "compile");
  EXPECT_TRUE(j["sandbox_id"].is_null());
  EXPECT_EQ(j["language"], "c");
  for (const char* absent : {"mode", "files_created", "kernel", "result", "error", "displays",
                             "hint", "state_lost", "queued_ms", "cpu_time_ms", "execution_count"})
    EXPECT_FALSE(j.contains(absent)) << absent;
  EXPECT_FALSE(r.timed_out());
}

TEST(RunResultJson, NonImageValuesStayInTheBundle) {
  // An "image" whose value is not a string is the kernel's data, kept as is.
  const MimeBundle b = mime_bundle_of(json{{"image/png", 3}, {"application/json", {{"a", 1}}}});
  EXPECT_TRUE(b.images.empty());
  EXPECT_EQ(b.other, (json{{"image/png", 3}, {"application/json", {{"a", 1}}}}));
  EXPECT_TRUE(mime_bundle_of(json("not a bundle")).other.empty());
}

}  // namespace
}  // namespace sandcastle::service
