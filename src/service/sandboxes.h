// The service layer: every operation on sandboxes that a face offers (the
// MCP tools, the REST API, the console), with the caller's ownership applied.
// A face holds one Sandboxes and shapes what it returns for its protocol;
// the rules (limits, ownership, what a result says) live here once.
//
// Arguments are the JSON objects the MCP tools take (docs/tools.md, the
// tools' inputSchema): each operation checks them against that schema (types,
// ranges, unknown fields, defaults), so a face may pass a request body as it
// came. Results are the tools' structured results. An Error is a call that
// did nothing (kNotFound for a sandbox that is not the caller's, exactly as
// for a missing one); a run that timed out or was killed is a result.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cancel_token.h"
#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"
#include "service/file_uploads.h"
#include "service/runs.h"
#include "service/sandbox_events.h"

namespace sandcastle::sandbox {
struct TerminalRequest;
class Terminal;
}  // namespace sandcastle::sandbox

namespace sandcastle::service {

using json = nlohmann::json;

// One sandbox's resource use now (Sandbox::usage), for the live list.
struct UsageSample {
  std::string sandbox_id;
  std::uint64_t memory_bytes = 0;
  std::uint64_t peak_memory_bytes = 0;
  double cpu_ms = 0;
  std::uint64_t processes = 0;
  std::uint64_t disk_bytes = 0;
};
json usage_json(const UsageSample& u);

// A file's bytes as read (read_file with a size cap).
struct FileContent {
  std::string path;  // absolute, inside the sandbox
  std::string data;
  std::uint64_t size = 0;  // the file's whole size
  std::uint32_t mode = 0;
  bool truncated = false;  // data is the first max_bytes only
};

class Sandboxes {
 public:
  // `env` outlives this object.
  explicit Sandboxes(Env& env);
  ~Sandboxes();
  Sandboxes(const Sandboxes&) = delete;
  Sandboxes& operator=(const Sandboxes&) = delete;

  // --- lifecycle ---------------------------------------------------------
  // create_sandbox's arguments; the new sandbox (with "owner").
  Result<json> create(const Caller& c, const json& args);
  // The caller's sandboxes, live and dormant, oldest first (each with "owner").
  std::vector<json> list(const Caller& c);
  // One sandbox as list shows it plus "usage" while it runs; never starts a
  // stopped one.
  Result<json> get(const Caller& c, const std::string& id);
  // close_sandbox: {sandbox_id, closed}.
  Result<json> close(const Caller& c, const std::string& id);
  // pause_sandbox / resume_sandbox / fork_sandbox / save_sandbox with their
  // tools' arguments (sandbox_id from `id`, overriding any in `args`).
  Result<json> pause(const Caller& c, const std::string& id, const json& args = json::object());
  // set_sandbox_network: {allow?, deny?} replace the rules of a networked sandbox.
  Result<json> set_network(const Caller& c, const std::string& id, const json& args);
  Result<json> resume(const Caller& c, const std::string& id, const json& args = json::object());
  Result<json> fork(const Caller& c, const std::string& id, const json& args = json::object());
  Result<json> save(const Caller& c, const std::string& id, const json& args = json::object());

  // --- runs --------------------------------------------------------------
  // execute_code's / execute_command's arguments and structured result
  // (runs.h; stdout, stderr, exit_code, reason, files_created, result,
  // displays with their images inline as base64, ...).
  Result<json> run_code(const Caller& c, const json& args, const RunOptions& opts = {});
  Result<json> run_command(const Caller& c, const json& args, const RunOptions& opts = {});
  // Interrupts the runs in progress in that sandbox, whoever started them
  // (an MCP client, a REST request): a kernel's cell gets KeyboardInterrupt,
  // a process is killed, and each run ends with reason "cancelled" (its
  // caller still gets the result). False when none was running.
  Result<bool> interrupt(const Caller& c, const std::string& id);
  // restart_kernel's result.
  Result<json> restart_kernel(const Caller& c, const std::string& id);
  // get_sandbox_history: `before` is the previous page's next_before (0: the
  // newest), `limit` 0 for the default.
  Result<json> history(const Caller& c, const std::string& id, std::int64_t before = 0,
                       std::size_t limit = 0);

  // --- files (paths relative to the workdir, or absolute) ----------------
  // {path, entries: [{name, path, type, size, mode, mtime}], truncated}
  Result<json> list_files(const Caller& c, const std::string& id, const std::string& path);
  // At most `max_bytes` (0: the server's max_file_bytes) of the file.
  Result<FileContent> read_file(const Caller& c, const std::string& id, const std::string& path,
                                std::uint64_t max_bytes = 0);
  // Creates or replaces a file (parents made); {path, size}. Larger than
  // max_file_bytes: kResourceExhausted, nothing written.
  Result<json> write_file(const Caller& c, const std::string& id, const std::string& path,
                          std::string_view data);
  // Creates or replaces every file, or (an error) none: write_all_or_none
  // (file_uploads.h). [{path, size}] in the order given.
  Result<json> write_files(const Caller& c, const std::string& id,
                           const std::vector<FileUpload>& files);
  Status remove_file(const Caller& c, const std::string& id, const std::string& path,
                     bool recursive);
  std::uint64_t max_file_bytes() const;

  // --- packages ----------------------------------------------------------
  // install_packages' arguments and result (sandbox_id from `id`).
  Result<json> install_packages(const Caller& c, const std::string& id, const json& args);
  // {packages: [{name, manager, status, version, error}]}
  Result<json> packages(const Caller& c, const std::string& id);

  // --- terminals ----------------------------------------------------------
  // An interactive shell in the sandbox (Sandbox::open_terminal). The lease
  // keeps the sandbox in use (the reaper waits) until the terminal, destroyed
  // first, is gone.
  struct OpenTerminal {
    std::shared_ptr<void> lease;
    std::unique_ptr<sandbox::Terminal> terminal;
    ~OpenTerminal();
  };
  Result<std::unique_ptr<OpenTerminal>> open_terminal(const Caller& c, const std::string& id,
                                                      const sandbox::TerminalRequest& req);

  // --- images, usage, server ---------------------------------------------
  // list_images' result.
  Result<json> images(const Caller& c);
  Result<UsageSample> usage(const Caller& c, const std::string& id);
  // Usage of at most `max` running sandboxes of `owner` (nullopt: all
  // owners), from the `start`th in list order;
  // `total` gets how many there are. A watcher of many sandboxes samples
  // them in turns, at a bounded cost per turn.
  std::vector<UsageSample> usage_some(const std::optional<std::string>& owner, std::size_t start,
                                      std::size_t max, std::size_t* total);
  std::size_t live_count() const;
  std::size_t max_sandboxes() const;
  std::size_t warm_ready() const;

  // Created / changed / removed, for live lists (sandbox_events.h).
  SandboxEvents& events() { return *events_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::unique_ptr<SandboxEvents> events_;
};

}  // namespace sandcastle::service
