// Where the server records its sandboxes: the registry (id, name, owner,
// spec, status, times), the packages installed in each, and the run history.
// SqliteSandboxStore (sqlite_sandbox_store.h) keeps them in the state
// database so persistent sandboxes survive restarts; MemorySandboxStore is
// for tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::store {

// kRunning: live in this server. kPaused: its processes stopped (or
// checkpointed), its files kept; resume_sandbox brings it back. kStopped:
// a persistent sandbox whose server ended; it starts again on first use.
enum class SandboxStatus { kRunning, kPaused, kStopped };
const char* sandbox_status_name(SandboxStatus s);
std::optional<SandboxStatus> parse_sandbox_status(const std::string& s);

struct SandboxRecord {
  std::string id;
  std::string name;
  std::string owner;
  std::string language;
  std::string image;
  bool persistent = false;
  std::chrono::system_clock::time_point created_at;
  std::chrono::system_clock::time_point last_used_at;
  std::chrono::seconds ttl{0};
  std::string ttl_action = "destroy";  // destroy | pause
  SandboxStatus status = SandboxStatus::kRunning;
  // Whether a paused sandbox's memory was checkpointed (resume restores it)
  // or lost (resume starts its processes afresh).
  bool memory_saved = false;
  std::string spec_json;  // the whole SpecOptions, to recreate the sandbox
  // The server that runs it ("pid:start time", common/proc_identity.h):
  // at start a server removes an ephemeral record only when its server is
  // gone, as several servers may share one state dir.
  std::string server;
};

struct PackageEntry {
  std::string name;
  std::string manager;  // pip | npm
  std::string version;  // as installed; empty while installing or failed
  std::string state;    // installing | success | failed
  std::string error;
  std::chrono::system_clock::time_point updated;
};

// One execute_code / execute_command call.
struct HistoryEntry {
  std::int64_t seq = 0;  // assigned by append; increasing per store
  std::string sandbox_id;
  std::chrono::system_clock::time_point at;
  std::string caller;                    // owner / key id / session
  std::string tool;                      // execute_code | execute_command
  std::string language;                  // for execute_code
  std::string input;                     // the code or the command (capped)
  std::string stdout_data, stderr_data;  // capped
  bool truncated = false;                // input or output cut to the cap
  int exit_code = -1;
  std::string reason;  // exited | timeout | out_of_memory | killed | cancelled | error
  std::int64_t duration_us = 0;
  std::vector<std::string> files_created;
  int images = 0;  // images produced (plots)
};

struct HistoryPage {
  std::vector<HistoryEntry> entries;        // newest first
  std::optional<std::int64_t> next_before;  // pass as `before` for the next page
};

class SandboxStore {
 public:
  virtual ~SandboxStore() = default;
  virtual Status put(const SandboxRecord& record) = 0;
  // Removes the record with its packages and history.
  virtual Status remove(const std::string& id) = 0;
  virtual std::optional<SandboxRecord> get(const std::string& id) const = 0;
  // Every record; an error when the store could not be read whole (a
  // caller that deletes what is not listed must not act on a partial list).
  virtual Result<std::vector<SandboxRecord>> list() const = 0;
  virtual Status set_status(const std::string& id, SandboxStatus status, bool memory_saved) = 0;
  virtual Status touch(const std::string& id, std::chrono::system_clock::time_point at) = 0;

  virtual Status put_package(const std::string& id, const PackageEntry& p) = 0;
  virtual std::vector<PackageEntry> packages(const std::string& id) const = 0;

  // Appends (the store sets seq) and drops the oldest entries, of any
  // sandbox, while the history is over its byte budget.
  virtual Result<std::int64_t> append_history(const HistoryEntry& e) = 0;
  // Newest first, at most `limit`, only entries with seq < before (if set).
  virtual HistoryPage history(const std::string& id, std::size_t limit,
                              std::optional<std::int64_t> before) const = 0;
};

class MemorySandboxStore : public SandboxStore {
 public:
  Status put(const SandboxRecord& record) override;
  Status remove(const std::string& id) override;
  std::optional<SandboxRecord> get(const std::string& id) const override;
  Result<std::vector<SandboxRecord>> list() const override;
  Status set_status(const std::string& id, SandboxStatus status, bool memory_saved) override;
  Status touch(const std::string& id, std::chrono::system_clock::time_point at) override;
  Status put_package(const std::string& id, const PackageEntry& p) override;
  std::vector<PackageEntry> packages(const std::string& id) const override;
  Result<std::int64_t> append_history(const HistoryEntry& e) override;
  HistoryPage history(const std::string& id, std::size_t limit,
                      std::optional<std::int64_t> before) const override;

 private:
  mutable std::mutex mu_;
  std::map<std::string, SandboxRecord> records_;
  std::map<std::string, std::map<std::string, PackageEntry>> packages_;
  std::vector<HistoryEntry> history_;
  std::int64_t next_seq_ = 1;
};

}  // namespace sandcastle::store
