// Runs: execute_code and execute_command's logic, for every face (the MCP
// tools, the REST API, the console). Code runs in the sandbox's persistent
// kernel (python, javascript) or as a process (other languages, `fresh`),
// or in a one-shot sandbox made for it (no sandbox_id), which waits for a
// slot when the server runs its maximum. Each run is registered for
// interrupt (run_registry.h), recorded in the run history (history.h) and
// counted in the metrics; it returns a typed RunResult that a face turns
// into its own shape (run_result_json: the tools' structured result).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cancel_token.h"
#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

using json = nlohmann::json;

// Cancels a run from another thread (a client that went away): the one
// token type (common/cancel_token.h) the MCP session and the backends use.
using CancelToken = sandcastle::CancelToken;

// What happens while a run runs. Calls for one run are serialized; they run
// on the run's thread and should not block for long (the sandbox's output
// waits).
struct RunCallbacks {
  // "stdout" or "stderr", as the program writes it.
  std::function<void(std::string_view stream, std::string_view text)> on_output;
  // A one-shot run waits for a sandbox at the server's cap: its place.
  std::function<void(std::size_t position, std::size_t waiting)> on_queued;
  // The output that follows is the stage's: "compile" or "run".
  std::function<void(std::string_view stage)> on_stage;
};

// How run_code / run_command are asked to run.
struct RunOptions {
  RunCallbacks callbacks;
  CancelToken* cancel = nullptr;  // may be null
};

// A file the run created or changed in /workspace.
struct CreatedFile {
  std::string path;  // relative to the workdir
  std::uint64_t size = 0;
  std::string mime_type;
  std::string status;  // "created" or "modified"
  std::string uri;     // sandbox://, for resources/read
  std::string url;     // a download link; empty without the HTTP transport
};

// An image in a kernel's MIME bundle, base64 (SVG too: its text encoded).
struct BundleImage {
  std::string mime_type;
  std::string base64;
  std::size_t bytes = 0;  // the image's size (about, for base64 input)
};

// A kernel's MIME bundle (a result or a display): images apart, in the
// bundle's key order, the rest as the kernel sent it.
struct MimeBundle {
  json other = json::object();
  std::vector<BundleImage> images;
};

struct KernelInfo {
  bool state_lost = false;
  bool restarted = false;
  bool fresh = false;
  std::string death;  // "SIGSEGV", "out of memory": when it died
};

struct RunResult {
  std::string stdout_data;
  std::string stderr_data;
  int exit_code = 0;
  int signal = 0;
  std::chrono::microseconds duration{0};
  std::optional<std::chrono::microseconds> cpu_time;  // processes only
  std::optional<std::uint64_t> peak_memory_bytes;     // processes only
  bool truncated = false;
  std::uint64_t stdout_bytes = 0;
  std::uint64_t stderr_bytes = 0;
  std::string reason;                     // exited, timeout, oom, cancelled, kernel_died, ...
  std::string stage = "run";              // "compile": a compile that failed, nothing ran
  std::string mode;                       // "kernel", "process"; empty after a failed compile
  std::optional<std::string> language;    // execute_code's
  std::optional<std::string> sandbox_id;  // nullopt: a one-shot run
  std::optional<int> execution_count;     // kernel runs
  std::optional<KernelInfo> kernel;
  std::optional<MimeBundle> result;  // the last expression's value
  json error;                        // {name, value, traceback} or null
  std::vector<MimeBundle> displays;
  std::optional<std::vector<CreatedFile>> files_created;  // absent after a failed compile
  std::optional<std::size_t> files_created_total;         // set when not all are listed
  std::optional<double> queued_ms;                        // a one-shot waited for a sandbox
  std::string hint;                                       // what to do about the ending
  bool state_lost = false;  // the sandbox's processes were started again before this run
  // The model must act: a timeout, an OOM kill, a kernel's death, a failed compile.
  bool failed = false;

  bool timed_out() const { return reason == "timeout"; }
  std::size_t image_count() const;
};

// How images appear in run_result_json: inline (base64 strings in their
// bundle) or as {content_index, bytes}, numbered from a first index in the
// order result, then displays (where the MCP tool puts them as content).
enum class ImageForm { kInline, kContentIndex };

// A bundle as the kernel sent it, images taken apart.
MimeBundle mime_bundle_of(const json& bundle);

// The tools' structured result (run_output_schema).
json run_result_json(const RunResult& r, ImageForm images = ImageForm::kInline,
                     std::size_t first_index = 1);

// execute_code's arguments (the default language is the server's).
json run_code_input_schema(const Config& config);
// execute_command's arguments.
json run_command_input_schema();
// Both tools' result.
json run_output_schema();

// execute_code / execute_command with their tools' arguments (checked here).
// An Error is a run that produced no result (no such sandbox, a language the
// image lacks, a sandbox that died during it); a timeout is a result.
Result<RunResult> run_code(Env& env, const Caller& c, const json& args, const RunOptions& opts);
Result<RunResult> run_command(Env& env, const Caller& c, const json& args, const RunOptions& opts);

}  // namespace sandcastle::service
