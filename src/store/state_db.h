// The state database, <state dir>/sandcastle.db: one SQLite file shared by
// the sandbox store (this connection), the API keys and the image records
// (each opens its own connection to the same file). Opening it checks that
// it is usable before anything depends on it: a corrupt file, a read-only
// directory or file and a full disk each fail with a message naming the
// path and what to do, never with a silent reset.
#pragma once

#include <sqlite3.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::store {

// One step of the sandbox tables' schema: `version` is what the database
// is at once `sql` has run (in the same transaction as the version bump).
struct Migration {
  int version;
  const char* sql;
};

// The migrations this binary knows, oldest first (sqlite_sandbox_store.cc).
const std::vector<Migration>& sandbox_migrations();

// When open() reads the whole file with PRAGMA quick_check (the run
// history alone may be 256 MiB, and a stdio server starts per conversation).
enum class IntegrityCheck {
  kAfterUncleanStop,  // only when a run on this file did not close it (crash, kill -9)
  kAlways,            // `--check-db`
};

class StateDb {
 public:
  static constexpr const char* kFileName = "sandcastle.db";
  // Opens <state_dir>/sandcastle.db, creating it when missing, and brings
  // the sandbox tables up to date with `migrations`. Every open reads the
  // header and the schema and writes a row (a full disk or a read-only file
  // fails here); the whole file is checked as `check` says.
  static Result<std::unique_ptr<StateDb>> open(
      const std::string& state_dir, const std::vector<Migration>& migrations = sandbox_migrations(),
      IntegrityCheck check = IntegrityCheck::kAfterUncleanStop);
  // Calls mark_clean_stop().
  ~StateDb();
  // A clean stop: this run's row goes, so the next open skips quick_check
  // (kept when this run met a corrupt page: the next open checks). For a
  // server that ends with _exit, once its last write is done. Idempotent.
  void mark_clean_stop();
  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  int schema_version() const { return version_; }
  // Whether open() ran quick_check (tests, and the start-up log).
  bool integrity_checked() const { return integrity_checked_; }

  // Runs `sql` (no result rows); errors carry the path and what it means.
  Status exec(const std::string& sql, const std::string& what);
  // The error for SQLite result `rc` while doing `what`, worded for the
  // operator: a full disk, a read-only file or a corrupt file say so and
  // name the path.
  Error error(int rc, const std::string& what) const;

 private:
  StateDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  Status check_integrity();
  // Runs on this file that never closed it (their processes are gone); the
  // schema is read on the way. A file written before runs were recorded
  // counts as one such run.
  Result<std::vector<std::string>> unclean_runs();
  // Records this run (and forgets `checked`, the unclean runs just checked).
  Status record_run(const std::vector<std::string>& checked);
  Result<int> read_version();
  Status set_wal();
  Status migrate(const std::vector<Migration>& migrations);
  Status probe_write();

  sqlite3* db_;
  std::string path_;
  int version_ = 0;
  bool integrity_checked_ = false;
  std::string run_;  // this run's row in server_runs, once recorded
  mutable std::atomic<bool> saw_corrupt_{false};
};

// The same wording for callers that see an SQLite error on another
// connection to the state database.
Error state_db_error(int rc, const std::string& path, const std::string& what, const char* detail);

}  // namespace sandcastle::store
