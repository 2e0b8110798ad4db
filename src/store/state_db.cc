#include "store/state_db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "common/proc_identity.h"

namespace sandcastle::store {

namespace {

std::string dir_of(const std::string& path) {
  auto d = std::filesystem::path(path).parent_path().string();
  return d.empty() ? "." : d;
}

bool is_corrupt(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB;
}

bool is_read_only(int rc) {
  const int primary = rc & 0xff;
  return primary == SQLITE_READONLY || primary == SQLITE_CANTOPEN || primary == SQLITE_PERM ||
         primary == SQLITE_AUTH;
}

}  // namespace

Error state_db_error(int rc, const std::string& path, const std::string& what, const char* detail) {
  const std::string why = detail && *detail ? detail : sqlite3_errstr(rc);
  const std::string dir = dir_of(path);
  if ((rc & 0xff) == SQLITE_FULL)
    return Error::make(ErrorCode::kResourceExhausted,
                       "state database " + path + ": the disk is full (" + what + ": " + why +
                           "); free space on the filesystem holding " + dir + " and start again");
  if (is_corrupt(rc))
    return Error::make(
        ErrorCode::kFailedPrecondition,
        "state database " + path + " is corrupt (" + what + ": " + why +
            "). sandcastle does not reset it: stop every sandcastle using it, move it aside "
            "(mv " +
            path + " " + path +
            ".corrupt, and its -wal and -shm files if present) "
            "and start again to create an empty one, or restore a backup; API keys, image "
            "records and sandbox records live in that file");
  if (is_read_only(rc))
    return Error::make(
        ErrorCode::kPermissionDenied,
        "state database " + path + " is read-only (" + what + ": " + why +
            "): sandcastle must write it and its -wal/-shm files; make the state directory " + dir +
            " and the file writable by uid " + std::to_string(::geteuid()) +
            ", or pass --state-dir");
  return Error::make(ErrorCode::kIo, "state database " + path + ": " + what + ": " + why);
}

Error StateDb::error(int rc, const std::string& what) const {
  // A corrupt page met while running: this run's row stays at close, so
  // the next open reads the whole file and stops there, naming it.
  if (is_corrupt(rc)) saw_corrupt_.store(true);
  // An I/O error's cause is in errno: a full disk may surface as
  // SQLITE_IOERR (growing the -shm file), not SQLITE_FULL.
  const int sys = sqlite3_system_errno(db_);
  std::string detail = sqlite3_errmsg(db_);
  if ((rc & 0xff) == SQLITE_IOERR && sys != 0) {
    detail += std::string(" (") + errno_text(sys) + ")";
    if (sys == ENOSPC || sys == EDQUOT) rc = SQLITE_FULL;
    if (sys == EROFS || sys == EACCES || sys == EPERM) rc = SQLITE_READONLY;
  }
  return state_db_error(rc, path_, what, detail.c_str());
}

Result<std::unique_ptr<StateDb>> StateDb::open(const std::string& state_dir,
                                               const std::vector<Migration>& migrations,
                                               IntegrityCheck check) {
  const std::string path = state_dir + "/" + kFileName;
  // Checked before SQLite: it would open a read-only file read-only without
  // a word, and fail later on the first write.
  if (::access(state_dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    if (err == ENOENT)
      return Error::make(ErrorCode::kNotFound, "state directory " + state_dir + " does not exist");
    return state_db_error(SQLITE_READONLY, path, "state directory " + state_dir, errno_text(err));
  }
  if (::access(path.c_str(), F_OK) == 0 && ::access(path.c_str(), R_OK | W_OK) != 0)
    return state_db_error(SQLITE_READONLY, path, "open", errno_text(errno));

  sqlite3* raw = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &raw,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    auto err = state_db_error(rc, path, "open", raw ? sqlite3_errmsg(raw) : nullptr);
    sqlite3_close(raw);
    return err;
  }
  std::unique_ptr<StateDb> db(new StateDb(raw, path));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, 5000);
  // Nobody but the server needs to read key hashes or run history.
  ::chmod(path.c_str(), 0600);
  if (sqlite3_db_readonly(raw, "main") == 1)
    return state_db_error(SQLITE_READONLY, path, "open", nullptr);
  // journal_mode reads the header first: a file that is not a database
  // fails here.
  if (auto s = db->set_wal(); !s.ok()) return s.error();
  if (auto s = db->exec("PRAGMA synchronous=NORMAL", "set synchronous"); !s.ok()) return s.error();
  if (auto s = db->exec("PRAGMA foreign_keys=ON", "enable foreign keys"); !s.ok()) return s.error();
  // The header was read above and the schema is read here: a file that is
  // not a database, or whose schema is damaged, fails on either path. The
  // rest of the file (the run history: up to 256 MiB) is read only after a
  // run that did not close it, or when asked.
  auto unclean = db->unclean_runs();
  if (!unclean.ok()) return unclean.take_error();
  if (check == IntegrityCheck::kAlways || !unclean->empty()) {
    if (auto s = db->check_integrity(); !s.ok()) return s.error();
    db->integrity_checked_ = true;
  }
  if (auto s = db->migrate(migrations); !s.ok()) return s.error();
  if (auto s = db->probe_write(); !s.ok()) return s.error();
  if (auto s = db->record_run(*unclean); !s.ok()) return s.error();
  return db;
}

namespace {
// What a run before runs were recorded is called in unclean_runs().
constexpr const char* kUnrecordedRun = "unrecorded";

// This process's runs still open: one of its rows that is not among them
// was left by an open that never closed cleanly, although the process lives.
std::mutex g_open_runs_mu;
std::set<std::string> g_open_runs;

bool run_open(const std::string& run) {
  const std::string identity = run.substr(0, run.find('#'));
  if (identity != self_identity()) return identity_alive(identity);
  std::lock_guard lock(g_open_runs_mu);
  return g_open_runs.count(run) > 0;
}
}  // namespace

StateDb::~StateDb() {
  mark_clean_stop();
  sqlite3_close_v2(db_);
}

void StateDb::mark_clean_stop() {
  if (!run_.empty()) {
    std::lock_guard lock(g_open_runs_mu);
    g_open_runs.erase(run_);
  }
  if (!run_.empty() && !saw_corrupt_.load()) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "DELETE FROM server_runs WHERE run = ?1", -1, &st, nullptr) ==
        SQLITE_OK) {
      sqlite3_bind_text(st, 1, run_.c_str(), -1, SQLITE_TRANSIENT);
      (void)sqlite3_step(st);  // failing, the next open just checks the file
    }
    sqlite3_finalize(st);
  }
  run_.clear();
}

Result<std::vector<std::string>> StateDb::unclean_runs() {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db_,
                              "SELECT count(*), coalesce(sum(name = 'server_runs'), 0) FROM "
                              "sqlite_master WHERE type = 'table'",
                              -1, &st, nullptr);
  if (rc != SQLITE_OK) return error(rc, "read the schema");
  rc = sqlite3_step(st);
  const int tables = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  const bool recorded = rc == SQLITE_ROW && sqlite3_column_int(st, 1) > 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW) return error(rc, "read the schema");
  std::vector<std::string> out;
  if (tables == 0) return out;  // a new file: nothing to check
  if (!recorded) return std::vector<std::string>{kUnrecordedRun};
  rc = sqlite3_prepare_v2(db_, "SELECT run FROM server_runs", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error(rc, "read the server runs");
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const std::string run = t ? t : "";
    // "<pid>:<start>#<n>": a run whose process is gone never closed the file.
    if (!run_open(run)) out.push_back(run);
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error(rc, "read the server runs");
  return out;
}

Status StateDb::record_run(const std::vector<std::string>& checked) {
  static std::atomic<unsigned> serial{0};  // several opens in one process
  const std::string run = self_identity() + "#" + std::to_string(serial++);
  if (auto s = exec("CREATE TABLE IF NOT EXISTS server_runs (run TEXT PRIMARY KEY, "
                    "started_at INTEGER NOT NULL)",
                    "create server_runs");
      !s.ok())
    return s;
  if (auto s = exec("BEGIN IMMEDIATE", "record this run"); !s.ok()) return s;
  auto step = [&](const char* sql, const std::string& value) {
    sqlite3_stmt* st = nullptr;
    int rc = sqlite3_prepare_v2(db_, sql, -1, &st, nullptr);
    if (rc == SQLITE_OK) {
      sqlite3_bind_text(st, 1, value.c_str(), -1, SQLITE_TRANSIENT);
      rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? ok_status() : Status(error(rc, "record this run"));
  };
  Status s;
  for (const auto& dead : checked)
    if (s.ok()) s = step("DELETE FROM server_runs WHERE run = ?1", dead);
  if (s.ok())
    s = step(
        "INSERT INTO server_runs(run, started_at) VALUES(?1, CAST(strftime('%s','now') AS "
        "INTEGER))",
        run);
  if (s.ok()) s = exec("COMMIT", "record this run");
  if (!s.ok()) {
    (void)exec("ROLLBACK", "record this run");
    return s;
  }
  run_ = run;
  std::lock_guard lock(g_open_runs_mu);
  g_open_runs.insert(run_);
  return ok_status();
}

// Switching a new file to WAL takes an exclusive lock that the busy
// handler does not wait for: servers starting together retry here.
Status StateDb::set_wal() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    auto s = exec("PRAGMA journal_mode=WAL", "set WAL mode");
    const int rc = sqlite3_errcode(db_) & 0xff;
    if (s.ok() || (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) ||
        std::chrono::steady_clock::now() > deadline)
      return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status StateDb::exec(const std::string& sql, const std::string& what) {
  char* msg = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return ok_status();
  sqlite3_free(msg);  // the same text as sqlite3_errmsg
  return error(rc, what);
}

Status StateDb::check_integrity() {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(db_, "PRAGMA quick_check(5)", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error(rc, "quick_check");
  std::string problems;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    const std::string line = t ? t : "";
    if (line != "ok") problems += (problems.empty() ? "" : "; ") + line;
  }
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) return error(rc, "quick_check");
  if (!problems.empty())
    return state_db_error(SQLITE_CORRUPT, path_, "quick_check", problems.c_str());
  return ok_status();
}

Result<int> StateDb::read_version() {
  sqlite3_stmt* st = nullptr;
  int rc = sqlite3_prepare_v2(
      db_, "SELECT version FROM schema_migrations WHERE component = 'sandboxes'", -1, &st, nullptr);
  if (rc != SQLITE_OK) return error(rc, "read schema version");
  rc = sqlite3_step(st);
  const int version = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
  sqlite3_finalize(st);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return error(rc, "read schema version");
  return version;
}

Status StateDb::migrate(const std::vector<Migration>& migrations) {
  if (auto s = exec("CREATE TABLE IF NOT EXISTS schema_migrations (component TEXT PRIMARY KEY,"
                    " version INTEGER NOT NULL, checked_at INTEGER NOT NULL DEFAULT 0)",
                    "create schema_migrations");
      !s.ok())
    return s;
  auto v = read_version();
  if (!v.ok()) return v.take_error();
  version_ = *v;
  const int known = migrations.empty() ? 0 : migrations.back().version;
  if (version_ > known)
    return Error::make(
        ErrorCode::kFailedPrecondition,
        "state database " + path_ + " has sandbox schema version " + std::to_string(version_) +
            ", newer than this sandcastle understands (" + std::to_string(known) +
            "): a newer sandcastle wrote it. Run that version, or point --state-dir elsewhere");
  for (const auto& m : migrations) {
    if (m.version <= version_) continue;
    // Each step whole or not at all: a crash mid-way leaves the old version.
    if (auto s = exec("BEGIN IMMEDIATE", "begin migration"); !s.ok()) return s;
    // Another server starting on the same file may have just done it.
    auto now = read_version();
    Status s = now.ok() ? Status{} : Status(now.take_error());
    const bool done = now.ok() && *now >= m.version;
    if (s.ok() && !done) s = exec(m.sql, "migration to version " + std::to_string(m.version));
    if (s.ok() && !done)
      s = exec("INSERT INTO schema_migrations(component, version) VALUES('sandboxes', " +
                   std::to_string(m.version) +
                   ") ON CONFLICT(component) DO UPDATE SET version = excluded.version",
               "record schema version");
    if (s.ok()) s = exec("COMMIT", "commit migration");
    if (!s.ok()) {
      (void)exec("ROLLBACK", "rollback migration");
      return s;
    }
    version_ = done ? *now : m.version;
  }
  return ok_status();
}

// A write at open, so a full disk or a file that cannot be written shows at
// start rather than at the first recorded run.
Status StateDb::probe_write() {
  return exec("INSERT INTO schema_migrations(component, version, checked_at) VALUES('sandboxes', " +
                  std::to_string(version_) +
                  ", CAST(strftime('%s','now') AS INTEGER)) ON CONFLICT(component) DO UPDATE SET "
                  "checked_at = "
                  "excluded.checked_at",
              "write check");
}

}  // namespace sandcastle::store
