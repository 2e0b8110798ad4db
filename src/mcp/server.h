// The MCP server: what it is, the methods it answers and the tools it offers.
// Connection state lives in Session; one Server serves many sessions.
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "mcp/jsonrpc.h"
#include "mcp/request_context.h"
#include "mcp/task_store.h"
#include "mcp/tool_registry.h"

namespace sandcastle::mcp {

struct ServerInfo {
  std::string name = "sandcastle";
  std::string title = "sandcastle code sandbox";
  std::string version = SANDCASTLE_VERSION;
  std::string instructions;
};

struct ServerOptions {
  size_t max_inflight = 256;  // concurrent requests per session
  size_t page_size = 100;     // items per list page
  // Legacy era, before logging/setLevel: only warnings and worse, so streamed
  // output does not reach clients that never asked for log messages.
  std::string default_log_level = "warning";
};

// A method beyond the built-in lifecycle ones. Handlers throw RpcError.
struct MethodSpec {
  std::function<json(const json& params, RequestContext& ctx)> handler;
  // Runs on its own thread so a slow call never delays other requests.
  bool async = false;
  // Modern era: the result is cacheable and carries ttlMs/cacheScope.
  bool cacheable = false;
  int ttl_ms = 0;
  bool cache_public = false;
  bool legacy_only = false;
  bool modern_only = false;
  // The result depends only on the params (not on the caller or on time):
  // the server serializes it once per params and era and sends those bytes
  // again (tools/list: a large page that every client asks for).
  bool memoize = false;
};

// The task rounds (mcp/tasks.cc) running on the shared pool with this
// server's tools. They outlive the request that started them, so the server
// waits for them before its tools go: stop() cancels the running ones,
// refuses new ones and waits until every one has left.
class TaskRuns {
 public:
  // False once stopping: the round must not run.
  bool enter(const std::shared_ptr<CancelToken>& token);
  void leave(const std::shared_ptr<CancelToken>& token);
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::multiset<std::shared_ptr<CancelToken>> running_;
};

class Server {
 public:
  explicit Server(ServerInfo info = {}, ServerOptions options = {});
  // Waits for the task rounds still running (TaskRuns).
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const ServerInfo& info() const { return info_; }
  const ServerOptions& options() const { return options_; }
  ToolRegistry& tools() { return tools_; }
  const ToolRegistry& tools() const { return tools_; }

  // Adds a method (resources/read, prompts/list, ...). Capabilities follow
  // from what is registered, so they are never declared without a handler.
  void add_method(const std::string& name, MethodSpec spec);
  const MethodSpec* find_method(const std::string& name) const;

  json capabilities() const;
  json server_info_json() const;

  // The key that signs 2026-07-28 requestState values (random per process).
  const std::string& state_key() const { return state_key_; }

  // The tasks of every session (mcp/tasks.h); internally synchronized.
  TaskStore& task_store() const { return *tasks_; }
  const std::shared_ptr<TaskStore>& task_store_ptr() const { return tasks_; }
  const std::shared_ptr<TaskRuns>& task_runs() const { return task_runs_; }

  // Serialized results of `memoize` methods, by key; bounded.
  std::shared_ptr<const std::string> memo_get(const std::string& key) const;
  void memo_put(const std::string& key, std::shared_ptr<const std::string> text) const;

 private:
  void add_builtin_methods();

  ServerInfo info_;
  ServerOptions options_;
  ToolRegistry tools_;
  std::map<std::string, MethodSpec> methods_;
  std::string state_key_;
  std::shared_ptr<TaskStore> tasks_ = std::make_shared<TaskStore>();
  // After tasks_: stopped first. Its purge hooks drop jobs that hold tasks_,
  // never the last reference while the server lives.
  std::unique_ptr<TaskReaper> reaper_ = std::make_unique<TaskReaper>(*tasks_);
  mutable std::mutex memo_mu_;
  mutable std::map<std::string, std::shared_ptr<const std::string>> memo_;
  std::shared_ptr<TaskRuns> task_runs_ = std::make_shared<TaskRuns>();
};

}  // namespace sandcastle::mcp
