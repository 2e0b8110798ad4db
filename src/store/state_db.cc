#include "store/state_db.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

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
                                               const std::vector<Migration>& migrations) {
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
  if (auto s = db->check_integrity(); !s.ok()) return s.error();
  if (auto s = db->migrate(migrations); !s.ok()) return s.error();
  if (auto s = db->probe_write(); !s.ok()) return s.error();
  return db;
}

StateDb::~StateDb() {
  sqlite3_close_v2(db_);
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
