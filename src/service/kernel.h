// A persistent interpreter ("kernel") inside a sandbox: our own small driver
// (src/kernels/, published read-only to every sandbox, see
// kernel_driver_files.h) runs as one long-lived exec and talks to the server
// over a socketpair whose far end is the process's fd 3: nothing else in the
// sandbox can reach it. Frames are a 4-byte big-endian length and a JSON
// object; the driver's first is hello {pid, version}. Cell code runs in the
// driver's process and can write to that socket too, so every frame is
// hostile input (kernel_frame.h): capped from its length, checked field by
// field, and one that fails ends the kernel with an error to the caller.
//
// One cell at a time; output streams back while the cell runs. A cell that
// is cancelled or runs past its timeout is interrupted (KeyboardInterrupt /
// SIGINT); if that is ignored for the grace period the kernel is killed and a
// fresh one started, and the result says the state was lost. A kernel that
// dies on its own (segfault, OOM, os._exit) is reported the same way and
// replaced on the next call.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/cancel_token.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/sandbox.h"
#include "service/workspace_diff.h"

namespace sandcastle::service {

enum class KernelLanguage { kPython, kJavaScript };

// The kernel for a language name ("python", "javascript"), if it has one.
std::optional<KernelLanguage> kernel_language_for(const std::string& language);
const char* kernel_language_name(KernelLanguage lang);

// Where a sandbox without a shared directory (see kernel_driver_files.h) gets
// its own read-only copy of the drivers.
inline constexpr const char* kKernelDir = "/tmp/.sandcastle/kernel";

// Asks the driver to list `dir` after the cell as the file channel would
// (recursive, `skip` left out at the top, at most `max_entries` entries):
// the call then needs no round trip to the file worker for it.
struct CellListRequest {
  std::string dir;
  std::size_t max_entries = 0;
  std::string skip;
};

struct CellRequest {
  std::string code;
  std::optional<CellListRequest> list;
  std::string stdin_data;
  std::chrono::milliseconds timeout{30'000};
  std::size_t max_output_bytes = std::size_t{1024} * 1024;  // per stream, head and tail kept
  // How long an interrupted cell may take to stop before the kernel is killed.
  std::chrono::milliseconds interrupt_grace{2'000};
};

enum class CellEnd {
  kCompleted,   // the cell ran to its end (successfully or with an exception)
  kTimeout,     // ran past its timeout: interrupted, or the kernel was killed
  kCancelled,   // the request was cancelled: same
  kKernelDied,  // the kernel process died on its own (signal, OOM, exit)
};
const char* cell_end_name(CellEnd e);

struct CellResult {
  CellEnd end = CellEnd::kCompleted;
  std::string stdout_data, stderr_data;
  bool stdout_truncated = false, stderr_truncated = false;
  std::uint64_t stdout_total = 0, stderr_total = 0;
  nlohmann::json value;  // MIME bundle of the final expression, or null
  nlohmann::json error;  // {name, value, traceback} or null
  nlohmann::json displays = nlohmann::json::array();  // MIME bundles, in order
  int execution_count = 0;
  int exit_code = 0;  // 0, 1 after an exception, sys.exit's code, 128+signal on death
  int signal = 0;     // the signal that killed the kernel, when it died
  // The kernel's state is gone: it died, or it ignored the interrupt and was
  // killed. A fresh kernel answers the next call.
  bool state_lost = false;
  bool kernel_restarted = false;  // we killed and restarted it (timeout/cancel)
  bool fresh_kernel = false;      // this call started a new kernel first
  std::string death;              // "SIGSEGV", "out of memory", "exit 3"
  std::chrono::microseconds duration{0};
  // The workdir after the cell, as the driver listed it (CellRequest::list);
  // empty when it did not (a name that is not UTF-8, over its budget, or a
  // driver that does not list).
  std::optional<WorkspaceSnapshot> listing;
  bool listing_truncated = false;
};

struct CellCallbacks {
  // Output as it arrives ("stdout"/"stderr"); calls are serialized.
  std::function<void(const char* stream, std::string_view text)> on_output;
};

class Kernel {
 public:
  struct Instance;

  Kernel(sandbox::Sandbox& sb, KernelLanguage lang, std::map<std::string, std::string> env = {});
  ~Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;

  KernelLanguage language() const { return lang_; }

  // Starts a kernel process in the background unless one is running; the
  // next execute() finishes the handshake. Cheap: spawns one thread.
  void start_async();

  // Runs one cell. Concurrent calls wait their turn. Errors are about the
  // kernel itself (it could not start); everything the code did is in the
  // CellResult.
  // A persistent sandbox's files are on disk before it returns
  // (Sandbox::persist_changes).
  Result<CellResult> execute(const CellRequest& req, const CellCallbacks& cb = {},
                             CancelToken* cancel = nullptr);

  // Kills the running kernel (if any) and starts a fresh one.
  void restart();

  // {alive, pid, execution_count, version}
  nlohmann::json status() const;

 private:
  // warmup: started ahead of any cell, through the WarmupGate.
  std::shared_ptr<Instance> launch_locked(bool warmup = false);
  void kill_instance(const std::shared_ptr<Instance>& inst);

  Result<CellResult> run_cell(const CellRequest& req, const CellCallbacks& cb, CancelToken* cancel);
  sandbox::Sandbox& sb_;
  const KernelLanguage lang_;
  const std::map<std::string, std::string> env_;
  std::timed_mutex run_mu_;  // one cell at a time
  // Poked when a call's token is cancelled: one for the kernel's life, not
  // one per call (two syscalls saved on every cell).
  const UniqueFd cancel_ev_;
  mutable std::mutex mu_;
  std::shared_ptr<Instance> inst_;
  int execution_count_ = 0;
  bool ever_started_ = false;
};

}  // namespace sandcastle::service
