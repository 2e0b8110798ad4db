// Finished tasks (mcp/task_store.h) kept in the state database, so a task's
// result outlives a server restart until its TTL: table mcp_tasks, on a
// connection of its own (like the key store). Only terminal tasks are
// written; a task still running when the server stops is gone with its work.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/result.h"
#include "mcp/task_store.h"

namespace sandcastle::store {

class TaskRecords {
 public:
  // Opens (creating the table in) the state database at `path`.
  static Result<std::unique_ptr<TaskRecords>> open(const std::string& path);
  ~TaskRecords();
  TaskRecords(const TaskRecords&) = delete;
  TaskRecords& operator=(const TaskRecords&) = delete;

  Status put(const mcp::Task& t);
  Status erase(const std::vector<std::string>& ids);
  // Deletes the expired rows (at `now_ms`) and returns the rest.
  Result<std::vector<mcp::Task>> load(int64_t now_ms);

 private:
  explicit TaskRecords(sqlite3* db) : db_(db) {}
  Status exec(const char* sql, const std::string& what);
  std::mutex mu_;
  sqlite3* db_;
};

// Keeps `store`'s finished tasks in `records` and brings back the ones saved
// by an earlier run. `records` must outlive `store`'s use.
void persist_tasks(mcp::TaskStore& store, TaskRecords& records);

}  // namespace sandcastle::store
