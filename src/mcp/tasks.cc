#include "mcp/tasks.h"

#include <spdlog/spdlog.h>

#include "common/thread_pool.h"
#include "mcp/input_required.h"
#include "mcp/server.h"

namespace sandcastle::mcp {

namespace {

constexpr const char* kRelatedTask = "io.modelcontextprotocol/related-task";

bool declares_extension(const json& caps) {
  if (!caps.is_object()) return false;
  auto ext = caps.find("extensions");
  return ext != caps.end() && ext->is_object() && ext->contains(kTasksExtension);
}

json required_extension() {
  return json{{"extensions", {{kTasksExtension, json::object()}}}};
}

RpcError missing_extension(const std::string& what) {
  return RpcError{rpc_error::kMissingRequiredClientCapability,
                  what + " needs the " + std::string(kTasksExtension) +
                      " extension: declare it in _meta clientCapabilities.extensions",
                  json{{"requiredCapabilities", required_extension()}}};
}

// One task's work: everything a round needs after the request has been answered.
// NOLINTNEXTLINE(bugprone-exception-escape): json members; a failed allocation ends the process anyway
struct TaskJob {
  const Server* server = nullptr;  // alive while `runs` lets the round in
  std::shared_ptr<TaskRuns> runs;
  std::shared_ptr<TaskStore> store;
  std::string id;
  std::string tool;
  json args;
  std::string owner;
  Era era = Era::kLegacy;
  std::string version;
  int log_rank = -1;
  std::optional<json> progress_token;
  json client_caps;
  RequestContext::Send send;  // valid after the request: messages tied to no request
  std::shared_ptr<CancelToken> token;
};

// Notifications from the task's work name the task (2025-11-25); a modern
// client reads the task id from tasks/get instead.
RequestContext::Send task_sender(const TaskJob& job) {
  if (!job.send) return [](const json&) {};
  if (job.era == Era::kModern) return job.send;
  return [send = job.send, id = job.id](const json& msg) {
    json m = msg;
    if (m.contains("params") && m["params"].is_object())
      m["params"]["_meta"][kRelatedTask] = {{"taskId", id}};
    send(m);
  };
}

void run_round(const std::shared_ptr<TaskJob>& job, json responses, std::optional<json> state) {
  ElasticPool::shared().submit(
      [job, responses = std::move(responses), state = std::move(state)]() mutable {
        if (!job->runs->enter(job->token)) {
          job->store->fail(job->id, rpc_error::kInternalError,
                           "the server stopped before the task ran");
          return;
        }
        struct Leave {
          TaskJob& job;
          ~Leave() { job.runs->leave(job.token); }
        } leave{*job};
        RequestContext ctx(task_sender(*job), json(job->id), job->progress_token, job->era,
                           job->version, job->log_rank, job->token.get(), job->owner);
        ctx.set_client_capabilities(job->client_caps);
        ctx.set_input_round(std::move(responses), std::move(state));
        try {
          ToolResult r = job->server->tools().call(job->tool, job->args, ctx);
          job->store->complete(job->id, r.to_json());  // dropped when cancelled meanwhile
        } catch (InputRequired& more) {
          job->store->park(job->id, std::move(more.input_requests), std::move(more.state));
        } catch (const RpcError& e) {
          job->store->fail(job->id, e.code, e.message);
        } catch (const std::exception& e) {
          spdlog::error("task {} ({}) failed: {}", job->id, job->tool, e.what());
          job->store->fail(job->id, rpc_error::kInternalError,
                           std::string("Internal error: ") + e.what());
        }
      });
}

// The running tasks' jobs, so tasks/update can start the next round. Bounded
// by the store's limits: an entry goes when its task is terminal or purged.
struct Jobs {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<TaskJob>> by_id;
};
Jobs& jobs() {
  static Jobs j;
  return j;
}

std::string task_id_param(const json& params) {
  auto it = params.find("taskId");
  if (it == params.end() || !it->is_string())
    throw invalid_params("\"taskId\" must be a string: the id a tools/call returned");
  return it->get<std::string>();
}

RpcError unknown_task(const std::string& id) {
  return invalid_params("Unknown task '" + id +
                        "': it never existed, belongs to another caller, or expired");
}

void require_modern_extension(const RequestContext& ctx, const std::string& method) {
  if (ctx.era() == Era::kModern && !declares_extension(ctx.client_capabilities()))
    throw missing_extension(method);
}

json detailed_task(const Task& t, const TaskStore& store) {
  json j = task_json(t, Era::kModern, store.limits().poll_interval_ms);
  if (t.status == TaskStatus::kCompleted && !t.result.is_null()) j["result"] = t.result;
  if (t.status == TaskStatus::kFailed && !t.error.is_null()) j["error"] = t.error;
  if (t.status == TaskStatus::kInputRequired && t.input_requests.is_object())
    j["inputRequests"] = t.input_requests;
  return j;
}

// A failed task's error as tasks/result throws it; a damaged one (restored
// from the state database) is a clean -32603, never a throw from json.
RpcError failure_of(const Task& t) {
  const json& e = t.error;
  if (!e.is_object())
    return RpcError{rpc_error::kInternalError, "task '" + t.id + "' failed", nullptr};
  auto code = e.find("code");
  auto message = e.find("message");
  return RpcError{
      code != e.end() && code->is_number_integer() ? code->get<int>() : rpc_error::kInternalError,
      message != e.end() && message->is_string() ? message->get<std::string>()
                                                 : "task '" + t.id + "' failed",
      nullptr};
}

}  // namespace

json task_json(const Task& t, Era era, int64_t poll_interval_ms) {
  json j{{"taskId", t.id},
         {"status", task_status_name(t.status)},
         {"createdAt", iso8601_ms(t.created_ms)},
         {"lastUpdatedAt", iso8601_ms(t.updated_ms)}};
  if (!t.status_message.empty()) j["statusMessage"] = t.status_message;
  if (era == Era::kModern) {
    j["ttlMs"] = t.ttl_ms;
    if (!is_terminal(t.status)) j["pollIntervalMs"] = poll_interval_ms;
  } else {
    j["ttl"] = t.ttl_ms;
    if (!is_terminal(t.status)) j["pollInterval"] = poll_interval_ms;
  }
  return j;
}

void add_task_capabilities(json& caps, Era era, const std::string& version) {
  if (era == Era::kModern) {
    caps["extensions"][kTasksExtension] = json::object();
  } else if (version_at_least(version, "2025-11-25")) {
    caps["tasks"] = {{"list", json::object()},
                     {"cancel", json::object()},
                     {"requests", {{"tools", {{"call", json::object()}}}}}};
  }
}

std::optional<json> maybe_start_task(const Server& server, const ToolDefinition& def,
                                     const json& args, const json& params, RequestContext& ctx) {
  const bool modern = ctx.era() == Era::kModern;
  if (def.task_support == TaskSupport::kForbidden) {
    // 2025-11-25: a task asked of a tool without task support is -32601,
    // so the client never takes a plain result for a task it thinks it has.
    if (auto hint = params.find("task"); !modern && hint != params.end() && hint->is_object())
      throw RpcError{rpc_error::kMethodNotFound,
                     "tool '" + def.name +
                         "' does not run as a task (its execution.taskSupport is forbidden): "
                         "call it without params.task",
                     nullptr};
    return std::nullopt;
  }
  std::optional<int64_t> ttl;
  if (modern) {
    if (!declares_extension(ctx.client_capabilities())) {
      if (def.task_support == TaskSupport::kRequired)
        throw missing_extension("tool '" + def.name + "'");
      return std::nullopt;
    }
  } else {
    auto hint = params.find("task");
    if (hint == params.end() || !hint->is_object()) {
      if (def.task_support == TaskSupport::kRequired)
        throw RpcError{rpc_error::kMethodNotFound,
                       "tool '" + def.name +
                           "' runs only as a task: call it with params.task (MCP 2025-11-25 tasks)",
                       nullptr};
      return std::nullopt;
    }
    if (auto t = hint->find("ttl"); t != hint->end() && t->is_number_integer())
      ttl = t->get<int64_t>();
  }
  if (def.before_task) def.before_task(args, ctx);  // may end this round with InputRequired
  TaskStore& store = server.task_store();
  std::shared_ptr<CancelToken> token;
  auto created = store.create(ctx.owner(), def.name, ttl, &token);
  if (!created)
    throw RpcError{rpc_error::kInternalError, "Cannot start a task: " + created.error().context,
                   nullptr};
  auto job = std::make_shared<TaskJob>();
  job->server = &server;
  job->runs = server.task_runs();
  job->store = server.task_store_ptr();
  job->id = created->id;
  job->tool = def.name;
  job->args = args;
  job->owner = ctx.owner();
  job->era = ctx.era();
  job->version = ctx.protocol_version();
  job->log_rank = ctx.min_log_rank();
  job->progress_token = ctx.progress_token();
  job->client_caps = ctx.client_capabilities();
  job->send = ctx.detached_send();
  job->token = std::move(token);
  {
    std::lock_guard lock(jobs().mu);
    jobs().by_id[job->id] = job;
  }
  // A purge between create() and here found no job to drop: drop it now.
  if (!store.contains(job->id)) {
    {
      std::lock_guard lock(jobs().mu);
      jobs().by_id.erase(job->id);
    }
    throw RpcError{rpc_error::kInternalError,
                   "Cannot start a task: it expired before its work started; ask for a longer ttl",
                   nullptr};
  }
  run_round(job, ctx.input_responses(), std::nullopt);
  json t = task_json(*created, ctx.era(), store.limits().poll_interval_ms);
  if (!modern) return json{{"task", std::move(t)}};
  t["resultType"] = "task";
  return t;
}

void register_task_methods(Server& server) {
  // Jobs of finished tasks are dropped as they finish; the store's hook.
  server.task_store().add_on_terminal([](const Task& t) {
    std::lock_guard lock(jobs().mu);
    jobs().by_id.erase(t.id);
  });
  server.task_store().add_on_purge([](const std::vector<std::string>& ids) {
    std::lock_guard lock(jobs().mu);
    for (const auto& id : ids) jobs().by_id.erase(id);
  });

  MethodSpec get;
  get.handler = [&server](const json& params, RequestContext& ctx) -> json {
    require_modern_extension(ctx, "tasks/get");
    std::string id = task_id_param(params);
    auto t = server.task_store().get(ctx.owner(), id);
    if (!t) throw unknown_task(id);
    if (ctx.era() == Era::kModern) return detailed_task(*t, server.task_store());
    return task_json(*t, Era::kLegacy, server.task_store().limits().poll_interval_ms);
  };
  server.add_method("tasks/get", std::move(get));

  MethodSpec cancel;
  cancel.handler = [&server](const json& params, RequestContext& ctx) -> json {
    require_modern_extension(ctx, "tasks/cancel");
    std::string id = task_id_param(params);
    TaskStore& store = server.task_store();
    auto outcome = store.cancel(ctx.owner(), id);
    if (outcome == TaskStore::Cancel::kUnknown) throw unknown_task(id);
    if (ctx.era() == Era::kModern)
      return json::object();  // idempotent ack; tasks/get shows the status
    if (outcome == TaskStore::Cancel::kAlreadyTerminal)
      throw invalid_params("Cannot cancel task '" + id + "': it has already finished");
    auto t = store.get(ctx.owner(), id);
    if (!t) throw unknown_task(id);
    return task_json(*t, Era::kLegacy, store.limits().poll_interval_ms);
  };
  server.add_method("tasks/cancel", std::move(cancel));

  MethodSpec update;
  update.modern_only = true;
  update.handler = [&server](const json& params, RequestContext& ctx) -> json {
    require_modern_extension(ctx, "tasks/update");
    std::string id = task_id_param(params);
    auto answers = params.find("inputResponses");
    if (answers == params.end() || !answers->is_object())
      throw invalid_params(
          "\"inputResponses\" must be an object keyed like the task's inputRequests");
    json responses;
    std::optional<json> state;
    auto outcome = server.task_store().update(ctx.owner(), id, *answers, &responses, &state);
    if (outcome == TaskStore::Update::kUnknown) throw unknown_task(id);
    if (outcome == TaskStore::Update::kResume) {
      std::shared_ptr<TaskJob> job;
      {
        std::lock_guard lock(jobs().mu);
        auto it = jobs().by_id.find(id);
        if (it != jobs().by_id.end()) job = it->second;
      }
      if (job) {
        run_round(job, std::move(responses), std::move(state));
      } else {
        server.task_store().fail(id, rpc_error::kInternalError,
                                 "the task's work is gone (the server restarted?)");
      }
    }
    return json::object();
  };
  server.add_method("tasks/update", std::move(update));

  MethodSpec list;
  list.legacy_only = true;
  list.handler = [&server](const json& params, RequestContext& ctx) -> json {
    std::optional<std::string> cursor;
    if (auto c = params.find("cursor"); c != params.end()) {
      if (!c->is_string()) throw invalid_params("\"cursor\" must be a string");
      cursor = c->get<std::string>();
    }
    TaskStore& store = server.task_store();
    auto page = store.list(ctx.owner(), cursor, server.options().page_size);
    if (!page) throw invalid_params(page.error().context);
    json tasks = json::array();
    for (const auto& t : page->tasks)
      tasks.push_back(task_json(t, Era::kLegacy, store.limits().poll_interval_ms));
    json r{{"tasks", std::move(tasks)}};
    if (page->next_cursor) r["nextCursor"] = *page->next_cursor;
    return r;
  };
  server.add_method("tasks/list", std::move(list));

  MethodSpec result;
  result.legacy_only = true;
  result.async = true;  // waits for the task
  result.handler = [&server](const json& params, RequestContext& ctx) -> json {
    std::string id = task_id_param(params);
    auto t = server.task_store().wait_terminal(ctx.owner(), id, ctx.cancel_token());
    if (!t) throw unknown_task(id);
    if (t->status == TaskStatus::kFailed) throw failure_of(*t);
    if (t->status == TaskStatus::kCancelled)
      throw RpcError{rpc_error::kInternalError, "task '" + id + "' was cancelled", nullptr};
    if (!is_terminal(t->status))
      throw RpcError{rpc_error::kInternalError, "request cancelled", nullptr};
    if (!t->result.is_object())  // a damaged row restored from the state database
      throw RpcError{rpc_error::kInternalError,
                     "task '" + id + "' completed but its stored result is damaged; run it again",
                     nullptr};
    json r = t->result;
    r["_meta"][kRelatedTask] = {{"taskId", id}};
    return r;
  };
  server.add_method("tasks/result", std::move(result));
}

}  // namespace sandcastle::mcp
