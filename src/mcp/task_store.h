// Tasks (MCP 2025-11-25 tasks and the 2026-07-28 extension
// io.modelcontextprotocol/tasks, SEP-2663): a tools/call that returns at once
// with a task id while the tool runs on; the client polls the task, answers
// its input requests, cancels it, and reads the result from it. This file is
// the state machine and the bounded, owner-scoped table of tasks; running
// them is mcp/tasks.cc.
//
//   working ──► completed | failed | cancelled
//      ▲  │
//      │  ▼
//   input_required ──► cancelled
//
// A task is visible only to its owner (RequestContext::owner). It lives for
// its TTL from creation; then it is purged (a task still running then is
// cancelled first): by a TaskReaper at that moment, or by the next create()
// or list().
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/cancel_token.h"
#include "common/result.h"
#include "mcp/jsonrpc.h"

namespace sandcastle::mcp {

inline constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";

enum class TaskStatus { kWorking, kInputRequired, kCompleted, kFailed, kCancelled };
const char* task_status_name(TaskStatus s);
std::optional<TaskStatus> parse_task_status(const std::string& name);
inline bool is_terminal(TaskStatus s) {
  return s == TaskStatus::kCompleted || s == TaskStatus::kFailed || s == TaskStatus::kCancelled;
}

struct TaskLimits {
  size_t max_per_owner = 64;  // tasks kept per owner (running or finished, until purged)
  size_t max_total = 1024;    // tasks kept by the server
  int64_t default_ttl_ms = 60LL * 60 * 1000;   // 1 h, when the client asks for none
  int64_t max_ttl_ms = 24LL * 60 * 60 * 1000;  // 24 h: the cap on any requested TTL
  // A shorter requested TTL is raised to this: a task that expires before
  // its work starts helps no one.
  int64_t min_ttl_ms = 1000;
  int64_t poll_interval_ms = 1000;
  size_t max_result_bytes = 16u << 20;  // a serialized result past this is replaced by an error
  // Results kept in RAM until their TTL (serialized bytes): past either, a
  // finished task fails instead ("result too large for the server's task budget").
  size_t max_owner_result_bytes = 64u << 20;
  size_t max_total_result_bytes = 512u << 20;
};

// A snapshot of one task.
// NOLINTNEXTLINE(bugprone-exception-escape): json members; a failed allocation ends the process anyway
struct Task {
  std::string id;
  std::string owner;
  std::string tool;
  TaskStatus status = TaskStatus::kWorking;
  std::string status_message;
  int64_t created_ms = 0;  // wall clock, ms since the epoch
  int64_t updated_ms = 0;
  int64_t ttl_ms = 0;
  json result;          // completed: the CallToolResult
  json error;           // failed: {code, message[, data]}
  json input_requests;  // input_required: the unanswered requests, by key
};

// "2026-07-28T10:00:00.123Z"
std::string iso8601_ms(int64_t ms_since_epoch);

class TaskStore {
 public:
  using Clock = std::function<int64_t()>;  // ms since the epoch
  explicit TaskStore(TaskLimits limits = {}, Clock clock = {});

  const TaskLimits& limits() const { return limits_; }

  // A new working task; kResourceExhausted past a limit (the message says
  // which and what to do). `ttl_ms` is clamped to [min_ttl_ms, max_ttl_ms].
  // `token`, when given, receives the task's cancel token (never null, even
  // if the task is purged before the caller looks it up).
  Result<Task> create(const std::string& owner, const std::string& tool,
                      std::optional<int64_t> ttl_ms, std::shared_ptr<CancelToken>* token = nullptr);
  // Whether the task is still held (not yet purged), whoever owns it.
  bool contains(const std::string& id) const;
  // The task, if it exists, has not expired and belongs to `owner`.
  std::optional<Task> get(const std::string& owner, const std::string& id);
  // The token the task's work runs with (tasks/cancel cancels it).
  std::shared_ptr<CancelToken> token(const std::string& id) const;

  // The work's transitions. False when the task is gone or already terminal
  // (it was cancelled meanwhile: the outcome is dropped).
  bool complete(const std::string& id, json result);
  bool fail(const std::string& id, int code, const std::string& message);
  bool park(const std::string& id, json input_requests, std::optional<json> state);
  bool set_message(const std::string& id, const std::string& message);

  // tasks/update: records the answers to pending input requests (unknown
  // keys are ignored). kResume when the last pending one was answered: the
  // task is working again and `responses`/`state` hold everything the
  // handler needs for its next round.
  enum class Update { kUnknown, kNotWaiting, kPending, kResume };
  Update update(const std::string& owner, const std::string& id, const json& answers,
                json* responses, std::optional<json>* state);

  enum class Cancel { kUnknown, kCancelled, kAlreadyTerminal };
  Cancel cancel(const std::string& owner, const std::string& id);

  struct Page {
    std::vector<Task> tasks;
    std::optional<std::string> next_cursor;
  };
  // The owner's tasks, oldest first; kInvalidArgument for a bad cursor.
  Result<Page> list(const std::string& owner, const std::optional<std::string>& cursor,
                    size_t page_size);

  // Blocks until the task is terminal (or gone or expired, or `stop` is cancelled).
  std::optional<Task> wait_terminal(const std::string& owner, const std::string& id,
                                    CancelToken* stop);

  // Drops expired tasks (cancelling any still running); returns how many.
  size_t purge_expired();
  // Purges each task when its TTL ends, until `stop` is cancelled (a
  // TaskReaper's thread).
  void reap(CancelToken& stop);
  size_t size() const;

  // Hooks, added before the store is used (not synchronized; restore()
  // counts as use): called, outside the lock, with each task that became
  // terminal, and with the ids purged (perhaps on a TaskReaper's thread).
  // restore() brings back a terminal task (after a restart) if it fits the
  // result budget.
  void add_on_terminal(std::function<void(const Task&)> fn) {
    on_terminal_.push_back(std::move(fn));
  }
  void add_on_purge(std::function<void(const std::vector<std::string>&)> fn) {
    on_purge_.push_back(std::move(fn));
  }
  void restore(Task t);

 private:
  struct Record {
    Task task;
    std::shared_ptr<CancelToken> token;
    json responses = json::object();  // every answer so far
    std::optional<json> state;        // the handler's state for its next round
    uint64_t seq = 0;                 // creation order, for list cursors
    size_t bytes = 0;                 // the kept result's share of the budget
  };
  int64_t now() const { return clock_(); }
  Record* find_locked(const std::string& owner, const std::string& id);
  std::vector<std::shared_ptr<CancelToken>> purge_locked(std::vector<std::string>* ids);
  bool finish(const std::string& id, TaskStatus status, json result, json error, size_t bytes = 0);
  Task finish_locked(Record& r, TaskStatus status, json result, json error, size_t bytes);
  std::optional<std::string> over_budget_locked(const std::string& owner, size_t bytes) const;
  void release_locked(const Record& r);
  std::optional<int64_t> next_expiry_locked() const;
  void after_purge(std::vector<std::shared_ptr<CancelToken>> tokens,
                   const std::vector<std::string>& ids);

  TaskLimits limits_;
  Clock clock_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::map<std::string, Record> tasks_;  // by id
  std::map<std::string, size_t> owner_bytes_;
  size_t total_bytes_ = 0;
  uint64_t next_seq_ = 1;
  std::vector<std::function<void(const Task&)>> on_terminal_;
  std::vector<std::function<void(const std::vector<std::string>&)>> on_purge_;
};

// A thread that runs store.reap() for its own lifetime: without it an idle
// server would keep expired results and run expired tasks until the next
// create() or list(). Destroy it before the store.
class TaskReaper {
 public:
  explicit TaskReaper(TaskStore& store) : thread_([this, &store] { store.reap(stop_); }) {}
  ~TaskReaper() {
    stop_.cancel();
    thread_.join();
  }
  TaskReaper(const TaskReaper&) = delete;
  TaskReaper& operator=(const TaskReaper&) = delete;

 private:
  CancelToken stop_;
  std::thread thread_;
};

}  // namespace sandcastle::mcp
