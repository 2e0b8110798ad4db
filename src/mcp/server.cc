#include "mcp/server.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>

#include "common/crypto.h"
#include "common/metrics.h"
#include "mcp/tasks.h"

namespace sandcastle::mcp {

bool TaskRuns::enter(const std::shared_ptr<CancelToken>& token) {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  running_.insert(token);
  return true;
}

void TaskRuns::leave(const std::shared_ptr<CancelToken>& token) {
  std::lock_guard lock(mu_);
  running_.erase(running_.find(token));
  cv_.notify_all();
}

void TaskRuns::stop() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  for (const auto& t : running_)
    if (t) t->cancel();
  cv_.wait(lock, [&] { return running_.empty(); });
}

Server::~Server() {
  task_runs_->stop();
}

Server::Server(ServerInfo info, ServerOptions options)
    : info_(std::move(info)), options_(options), tools_(options.page_size), state_key_(crypto::random_bytes(32)) {
  add_builtin_methods();
}

void Server::add_builtin_methods() {
  MethodSpec list;
  list.cacheable = true;
  list.ttl_ms = 60'000;
  list.cache_public = true;  // the same list for every client
  list.memoize = true;
  list.handler = [this](const json& params, RequestContext&) {
    std::optional<std::string> cursor;
    if (params.contains("cursor")) {
      if (!params["cursor"].is_string())
        throw RpcError{rpc_error::kInvalidParams, "\"cursor\" must be a string", nullptr};
      cursor = params["cursor"].get<std::string>();
    }
    return tools_.list_page(cursor);
  };
  add_method("tools/list", std::move(list));

  // 2026-07-28: a stream of list-changed and resource-update notifications,
  // acknowledged first, each tagged with the subscription's id. This
  // server's tool and prompt lists are fixed for its life and it offers no
  // resource updates, so the acknowledgement says that none of the requested
  // kinds will come; the stream stays open (as the era expects) until the
  // client closes it, which cancels the request.
  MethodSpec listen;
  listen.async = true;
  listen.modern_only = true;
  listen.handler = [](const json& params, RequestContext& ctx) -> json {
    if (params.contains("notifications") && !params["notifications"].is_object())
      throw RpcError{rpc_error::kInvalidParams,
                     "\"notifications\" must be an object such as {\"toolsListChanged\": true}", nullptr};
    ctx.notify("notifications/subscriptions/acknowledged",
               json{{"notifications", json::object()},
                    {"_meta", {{meta_key::kSubscriptionId, "sub-" + crypto::hex(crypto::random_bytes(8))}}}});
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    CancelToken* token = ctx.cancel_token();
    if (!token) return json::object();
    size_t sub = token->on_cancel([&] {
      std::lock_guard l(mu);
      done = true;
      cv.notify_all();
    });
    {
      std::unique_lock l(mu);
      cv.wait(l, [&] { return done; });
    }
    token->unsubscribe(sub);
    return json::object();  // not sent: a cancelled request gets no response
  };
  add_method("subscriptions/listen", std::move(listen));

  MethodSpec call;
  call.async = true;
  call.handler = [this](const json& params, RequestContext& ctx) {
    auto name = params.find("name");
    if (name == params.end() || !name->is_string())
      throw RpcError{rpc_error::kInvalidParams, "tools/call needs \"name\": the tool to call",
                     nullptr};
    json args = params.value("arguments", json::object());
    if (!args.is_object())
      throw RpcError{rpc_error::kInvalidParams, "\"arguments\" must be an object", nullptr};
    const std::string tool = name->get<std::string>();
    if (!tools_.contains(tool)) return tools_.call(tool, args, ctx).to_json();  // throws -32602
    if (auto task = maybe_start_task(*this, *tools_.find(tool), args, params, ctx)) return *task;
    auto start = std::chrono::steady_clock::now();
    ToolResult result = tools_.call(tool, args, ctx);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const char* outcome = ctx.cancelled() ? "cancelled" : result.is_error ? "error" : "ok";
    auto& reg = metrics::registry();
    reg.counter(metrics::name::kToolCalls, "tools/call requests, by tool and outcome",
                {{"tool", tool}, {"outcome", outcome}})
        .inc();
    reg.histogram(metrics::name::kToolCallSeconds, "tools/call duration in seconds, by tool", {{"tool", tool}})
        .observe(secs);
    return result.to_json();
  };
  add_method("tools/call", std::move(call));
  register_task_methods(*this);
}

void Server::add_method(const std::string& name, MethodSpec spec) {
  methods_[name] = std::move(spec);
}

const MethodSpec* Server::find_method(const std::string& name) const {
  auto it = methods_.find(name);
  return it == methods_.end() ? nullptr : &it->second;
}

json Server::capabilities() const {
  json caps{{"logging", json::object()}};
  if (tools_.size() > 0) caps["tools"] = {{"listChanged", false}};
  if (methods_.count("resources/read")) {
    caps["resources"] = {{"listChanged", false},
                         {"subscribe", methods_.count("resources/subscribe") != 0}};
  }
  if (methods_.count("prompts/list")) caps["prompts"] = {{"listChanged", false}};
  if (methods_.count("completion/complete")) caps["completions"] = json::object();
  return caps;
}

json Server::server_info_json() const {
  json j{{"name", info_.name}, {"version", info_.version}};
  if (!info_.title.empty()) j["title"] = info_.title;
  return j;
}

std::shared_ptr<const std::string> Server::memo_get(const std::string& key) const {
  std::lock_guard l(memo_mu_);
  auto it = memo_.find(key);
  return it == memo_.end() ? nullptr : it->second;
}

void Server::memo_put(const std::string& key, std::shared_ptr<const std::string> text) const {
  constexpr size_t kMaxEntries = 256;  // pages x eras; cursors are validated first
  std::lock_guard l(memo_mu_);
  if (memo_.size() >= kMaxEntries) memo_.clear();
  memo_[key] = std::move(text);
}

}  // namespace sandcastle::mcp
