#include "store/task_records.h"

#include <spdlog/spdlog.h>

#include <chrono>

#include "store/sqlite_stmt.h"

namespace sandcastle::store {

Result<std::unique_ptr<TaskRecords>> TaskRecords::open(const std::string& path) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(path.c_str(), &db,
                      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Error::make(ErrorCode::kIo, "open the task records in " + path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<TaskRecords> r(new TaskRecords(db));
  if (auto s = r->exec(
          "CREATE TABLE IF NOT EXISTS mcp_tasks (id TEXT PRIMARY KEY, owner TEXT NOT NULL,"
          " tool TEXT NOT NULL, status TEXT NOT NULL, status_message TEXT NOT NULL,"
          " created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, ttl_ms INTEGER NOT NULL,"
          " result TEXT, error TEXT)",
          "create table mcp_tasks");
      !s.ok())
    return s.error();
  return r;
}

TaskRecords::~TaskRecords() {
  sqlite3_close(db_);
}

Status TaskRecords::exec(const char* sql, const std::string& what) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Error::make(ErrorCode::kIo, what + ": " + msg);
  }
  return ok_status();
}

Status TaskRecords::put(const mcp::Task& t) {
  std::lock_guard lock(mu_);
  Stmt st(db_,
          "INSERT OR REPLACE INTO mcp_tasks(id, owner, tool, status, status_message, created_ms, "
          "updated_ms,"
          " ttl_ms, result, error) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  if (!st.ok()) return db_error(db_, "save task " + t.id);
  st.bind(1, t.id);
  st.bind(2, t.owner);
  st.bind(3, t.tool);
  st.bind(4, mcp::task_status_name(t.status));
  st.bind(5, t.status_message);
  st.bind_int64(6, t.created_ms);
  st.bind_int64(7, t.updated_ms);
  st.bind_int64(8, t.ttl_ms);
  st.bind(9, t.result.is_null() ? "" : t.result.dump());
  st.bind(10, t.error.is_null() ? "" : t.error.dump());
  if (st.step() != SQLITE_DONE) return db_error(db_, "save task " + t.id);
  return ok_status();
}

Status TaskRecords::erase(const std::vector<std::string>& ids) {
  std::lock_guard lock(mu_);
  for (const auto& id : ids) {
    Stmt st(db_, "DELETE FROM mcp_tasks WHERE id = ?1");
    if (!st.ok()) return db_error(db_, "delete task " + id);
    st.bind(1, id);
    if (st.step() != SQLITE_DONE) return db_error(db_, "delete task " + id);
  }
  return ok_status();
}

Result<std::vector<mcp::Task>> TaskRecords::load(int64_t now_ms) {
  std::lock_guard lock(mu_);
  {
    Stmt del(db_, "DELETE FROM mcp_tasks WHERE created_ms + ttl_ms <= ?1");
    if (!del.ok()) return db_error(db_, "purge expired tasks");
    del.bind_int64(1, now_ms);
    if (del.step() != SQLITE_DONE) return db_error(db_, "purge expired tasks");
  }
  Stmt st(db_,
          "SELECT id, owner, tool, status, status_message, created_ms, updated_ms, ttl_ms, result, "
          "error"
          " FROM mcp_tasks ORDER BY created_ms");
  if (!st.ok()) return db_error(db_, "read tasks");
  std::vector<mcp::Task> out;
  while (st.step() == SQLITE_ROW) {
    mcp::Task t;
    t.id = st.text(0);
    t.owner = st.text(1);
    t.tool = st.text(2);
    auto status = mcp::parse_task_status(st.text(3));
    if (!status) continue;
    t.status = *status;
    t.status_message = st.text(4);
    t.created_ms = st.int64(5);
    t.updated_ms = st.int64(6);
    t.ttl_ms = st.int64(7);
    // Written by this code from valid JSON; a damaged row is skipped, not fatal.
    t.result = nlohmann::json::parse(st.text(8), nullptr, false);
    t.error = nlohmann::json::parse(st.text(9), nullptr, false);
    if (t.result.is_discarded()) t.result = nullptr;
    if (t.error.is_discarded()) t.error = nullptr;
    out.push_back(std::move(t));
  }
  return out;
}

void persist_tasks(mcp::TaskStore& store, TaskRecords& records) {
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  // Hooks first: a restored task may be purged (by the reaper) at once.
  store.add_on_terminal([&records](const mcp::Task& t) {
    if (auto s = records.put(t); !s.ok()) spdlog::warn("task records: {}", s.error().message());
  });
  store.add_on_purge([&records](const std::vector<std::string>& ids) {
    if (auto s = records.erase(ids); !s.ok()) spdlog::warn("task records: {}", s.error().message());
  });
  if (auto saved = records.load(now); saved.ok()) {
    for (auto& t : *saved) store.restore(std::move(t));
    if (!saved->empty())
      spdlog::info("{} finished task(s) restored from the state database", saved->size());
  } else {
    spdlog::warn("task records: {}", saved.error().message());
  }
}

}  // namespace sandcastle::store
