#include "mcp/session.h"

#include "common/json_parse.h"
#include "common/thread_pool.h"

#include <spdlog/spdlog.h>

#include <thread>

#include "mcp/input_required.h"
#include "mcp/protocol.h"
#include "mcp/tasks.h"

namespace sandcastle::mcp {

namespace {

const json* find_meta(const json& params) {
  if (!params.is_object()) return nullptr;
  auto it = params.find("_meta");
  return (it != params.end() && it->is_object()) ? &*it : nullptr;
}

json versions_json() {
  json all = json::array();
  for (auto v : kModernVersions) all.push_back(v);
  for (auto it = kLegacyVersions.rbegin(); it != kLegacyVersions.rend(); ++it) all.push_back(*it);
  return all;
}

}  // namespace

std::shared_ptr<Session> Session::create(const Server& server, Send send, std::string owner) {
  return std::shared_ptr<Session>(new Session(server, std::move(send), std::move(owner)));
}

std::shared_ptr<Session> Session::create_routed(const Server& server, RoutedSend send,
                                               std::string owner, CloseStream close_stream) {
  auto s = std::shared_ptr<Session>(new Session(server, nullptr, std::move(owner)));
  s->routed_ = std::move(send);
  s->close_stream_ = std::move(close_stream);
  s->send_ = [routed = s->routed_](const json& m) { routed(m, nullptr); };
  return s;
}

void Session::emit(const json& msg, const json* related) const {
  if (routed_) {
    routed_(msg, related);
  } else {
    send_(msg);
  }
}

json Session::client_capabilities() const {
  std::lock_guard lock(mu_);
  return client_capabilities_;
}

void Session::handle_response(const json& msg) {
  std::shared_ptr<Outgoing> out;
  {
    std::lock_guard lock(mu_);
    auto it = outgoing_.find(msg["id"].dump());
    if (it == outgoing_.end()) {
      spdlog::debug("ignoring response with unknown id {}", msg["id"].dump());
      return;
    }
    out = it->second;
    outgoing_.erase(it);
  }
  std::lock_guard lock(out->mu);
  out->response = msg;
  out->cv.notify_all();
}

json Session::request_client(const std::string& method, json params, const json& related,
                             CancelToken* token, std::chrono::milliseconds timeout) {
  auto out = std::make_shared<Outgoing>();
  json id;
  {
    std::lock_guard lock(mu_);
    id = "sandcastle-" + std::to_string(next_outgoing_id_++);
    outgoing_[id.dump()] = out;
  }
  size_t sub = 0;
  if (token)
    sub = token->on_cancel([out] {
      std::lock_guard lock(out->mu);
      out->cv.notify_all();
    });
  emit(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}},
       &related);
  std::unique_lock lock(out->mu);
  bool got = out->cv.wait_for(lock, timeout, [&] {
    return out->response.has_value() || (token && token->cancelled());
  });
  lock.unlock();
  if (token && sub) token->unsubscribe(sub);
  if (!got || !out->response) {
    std::lock_guard mlock(mu_);
    outgoing_.erase(id.dump());
  }
  if (token && token->cancelled())
    throw RpcError{rpc_error::kInternalError, "request cancelled while waiting for the client", nullptr};
  if (!got || !out->response)
    throw RpcError{rpc_error::kInternalError,
                   "the client did not answer " + method + " within " +
                       std::to_string(timeout.count()) + " ms",
                   nullptr};
  const json& r = *out->response;
  if (r.contains("error")) {
    const json& e = r["error"];
    throw RpcError{e.value("code", rpc_error::kInternalError),
                   "the client answered " + method + " with an error: " + e.value("message", std::string()),
                   e.value("data", json())};
  }
  return r.value("result", json::object());
}

size_t Session::inflight() const {
  std::lock_guard lock(mu_);
  return running_;
}

std::string Session::negotiated_version() const {
  std::lock_guard lock(mu_);
  return negotiated_version_;
}

void Session::handle_text(std::string_view text) {
  // The transport bounded the size already (it never buffers past its limit).
  auto msg = parse_json(text, JsonLimits{text.size()});
  if (!msg) {
    send_(parse_failure(nullptr, msg.error()));
    return;
  }
  handle_json(*msg);
}

void Session::handle_json(const json& msg) {
  handle_json(msg, Runner());
}

void Session::handle_json(const json& msg, const Runner& run) {
  if (msg.is_array()) {
    handle_batch(msg);
    return;
  }
  Classified c = classify(msg);
  switch (c.kind) {
    case MessageKind::kInvalid:
      send_(make_error(c.id, rpc_error::kInvalidRequest, "Invalid Request: " + c.why));
      return;
    case MessageKind::kResponse:
      // An answer to one of our requests to the client; a stray one is harmless.
      handle_response(msg);
      return;
    case MessageKind::kNotification:
      handle_notification(msg);
      return;
    case MessageKind::kRequest: handle_request(msg, run ? &run : nullptr); return;
  }
}

void Session::handle_batch(const json& batch) {
  std::string version = negotiated_version();
  if (version != kBatchVersion) {
    send_(make_error(nullptr, rpc_error::kInvalidRequest,
                     "Invalid Request: JSON-RPC batches are accepted only when protocol version " +
                         std::string(kBatchVersion) + " was negotiated (this session: " +
                         (version.empty() ? "not initialized" : version) +
                         "); send messages one at a time"));
    return;
  }
  if (batch.empty()) {
    send_(make_error(nullptr, rpc_error::kInvalidRequest, "Invalid Request: empty batch"));
    return;
  }
  // Items run in order on one worker; the replies go back as one array.
  auto self = shared_from_this();
  {
    std::lock_guard lock(mu_);
    ++running_;
  }
  ElasticPool::shared().submit([self, batch] {
    json replies = json::array();
    for (const auto& item : batch) {
      Classified c = classify(item);
      if (c.kind == MessageKind::kInvalid) {
        replies.push_back(make_error(c.id, rpc_error::kInvalidRequest, "Invalid Request: " + c.why));
      } else if (c.kind == MessageKind::kNotification) {
        self->handle_notification(item);
      } else if (c.kind == MessageKind::kRequest) {
        auto entry = self->begin_inflight(item["id"]);
        if (!entry) {
          replies.push_back(make_error(item["id"], rpc_error::kInvalidRequest,
                                       "Invalid Request: a request with this id is already in flight"));
          continue;
        }
        auto reply = self->process_request(item, &entry->token);
        self->end_inflight(item["id"]);
        if (reply) replies.push_back(std::move(*reply));
      }
    }
    if (!replies.empty()) {
      const json* related = nullptr;
      for (const auto& item : batch)
        if (item.is_object() && item.contains("id") && item.contains("method")) {
          related = &item["id"];
          break;
        }
      self->emit(replies, related);
    }
    std::lock_guard lock(self->mu_);
    --self->running_;
    self->idle_cv_.notify_all();
  });
}

void Session::handle_notification(const json& msg) {
  const std::string& method = msg["method"].get_ref<const std::string&>();
  const json params = msg.value("params", json::object());
  if (method == "notifications/cancelled") {
    if (!params.is_object() || !params.contains("requestId")) return;
    std::shared_ptr<Inflight> entry;
    {
      std::lock_guard lock(mu_);
      auto it = inflight_.find(params["requestId"].dump());
      if (it != inflight_.end()) entry = it->second;
    }
    if (entry) {
      spdlog::debug("cancelling request {}: {}", params["requestId"].dump(),
                    params.value("reason", std::string("no reason given")));
      entry->token.cancel();
    }
    return;
  }
  if (method == "notifications/initialized") return;
  // Other notifications (roots/list_changed, progress for our requests) need no action.
  spdlog::debug("ignoring notification {}", method);
}

std::shared_ptr<Session::Inflight> Session::begin_inflight(const json& id) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = inflight_.try_emplace(id.dump(), nullptr);
  if (!inserted) return nullptr;
  it->second = std::make_shared<Inflight>();
  if (cancelling_) it->second->token.cancel();
  return it->second;
}

void Session::end_inflight(const json& id) {
  std::lock_guard lock(mu_);
  inflight_.erase(id.dump());
}

void Session::handle_request(const json& msg, const Runner* run) {
  const json& id = msg["id"];
  const std::string& method = msg["method"].get_ref<const std::string&>();
  const MethodSpec* spec = server_.find_method(method);
  bool async = spec && spec->async;
  if (async && method == "tools/call") {
    // A tool that cannot block is not worth a thread hand-off.
    const json& params = msg.contains("params") ? msg["params"] : msg;
    if (auto n = params.find("name"); n != params.end() && n->is_string()) {
      const ToolDefinition* def = server_.tools().find(n->get_ref<const std::string&>());
      if (def && def->runs_inline) async = false;
    }
  }
  {
    std::lock_guard lock(mu_);
    if (async && running_ >= server_.options().max_inflight) {
      emit(make_error(id, rpc_error::kInternalError,
                       "Server busy: " + std::to_string(running_) +
                           " requests already running in this session; retry when one finishes"),
           &id);
      return;
    }
  }
  auto entry = begin_inflight(id);
  if (!entry) {
    emit(make_error(id, rpc_error::kInvalidRequest,
                    "Invalid Request: a request with id " + id.dump() + " is already in flight"),
         &id);
    return;
  }
  if (!async) {
    auto reply = process_request(msg, &entry->token);
    end_inflight(id);
    if (reply) emit(*reply, &id);
    return;
  }
  {
    std::lock_guard lock(mu_);
    ++running_;
  }
  auto self = shared_from_this();
  std::function<void()> task = [self, msg, entry] {
    auto reply = self->process_request(msg, &entry->token);
    self->end_inflight(msg["id"]);
    if (reply) self->emit(*reply, &msg["id"]);
    std::lock_guard lock(self->mu_);
    --self->running_;
    self->idle_cv_.notify_all();
  };
  if (run)
    (*run)(std::move(task));
  else
    ElasticPool::shared().submit(std::move(task));
}

Session::Envelope Session::envelope_for(const std::string& method, const json& params) const {
  Envelope env;
  const json* meta = find_meta(params);
  if (meta) {
    if (auto t = meta->find("progressToken");
        t != meta->end() && (t->is_string() || t->is_number_integer()))
      env.progress_token = *t;
  }
  // A request carrying the modern _meta envelope is served statelessly;
  // initialize always selects the legacy handshake.
  if (meta && meta->contains(meta_key::kProtocolVersion) && method != "initialize") {
    env.era = Era::kModern;
    const json& v = (*meta)[meta_key::kProtocolVersion];
    if (!v.is_string())
      throw invalid_params(std::string("_meta.") + meta_key::kProtocolVersion + " must be a string");
    env.version = v.get<std::string>();
    if (!is_supported_modern_version(env.version)) {
      throw RpcError{rpc_error::kUnsupportedProtocolVersion,
                     "Unsupported protocol version: " + env.version,
                     json{{"supported", versions_json()}, {"requested", env.version}}};
    }
    auto caps = meta->find(meta_key::kClientCapabilities);
    if (caps == meta->end() || !caps->is_object())
      throw invalid_params(std::string("Request is missing _meta.") + meta_key::kClientCapabilities +
                           " (required for protocol version " + env.version + ")");
    if (auto lvl = meta->find(meta_key::kLogLevel); lvl != meta->end()) {
      if (!lvl->is_string() || log_level_rank(lvl->get<std::string>()) < 0)
        throw invalid_params(std::string("_meta.") + meta_key::kLogLevel +
                             " must be one of debug, info, notice, warning, error, critical, "
                             "alert, emergency");
      env.log_rank = log_level_rank(lvl->get<std::string>());
    }
    return env;
  }
  std::lock_guard lock(mu_);
  env.era = Era::kLegacy;
  env.version = negotiated_version_;
  env.log_rank = legacy_log_rank_;
  return env;
}

std::optional<json> Session::process_request(const json& msg, CancelToken* token) {
  const json& id = msg["id"];
  const std::string& method = msg["method"].get_ref<const std::string&>();
  json params = msg.value("params", json::object());
  json reply;
  try {
    if (!params.is_object()) throw invalid_params("\"params\" must be an object");
    Envelope env = envelope_for(method, params);
    reply = make_result(id, dispatch(method, params, env, token, id));
  } catch (const RpcError& e) {
    reply = make_error(id, e);
  } catch (const std::exception& e) {
    spdlog::error("request {} ({}) failed: {}", id.dump(), method, e.what());
    reply = make_error(id, rpc_error::kInternalError, std::string("Internal error: ") + e.what());
  }
  // A cancelled request gets no response at all.
  if (token->cancelled()) return std::nullopt;
  return reply;
}

json Session::dispatch(const std::string& method, const json& params, const Envelope& env,
                       CancelToken* token, const json& id) {
  const bool modern = env.era == Era::kModern;
  if (method == "initialize") return initialize(params);
  if (modern && method == "server/discover") {
    json result{{"supportedVersions", versions_json()},
                {"capabilities", server_.capabilities()}};
    add_task_capabilities(result["capabilities"], Era::kModern, env.version);
    if (!server_.info().instructions.empty()) result["instructions"] = server_.info().instructions;
    return finish_modern(std::move(result), nullptr);
  }
  if (!modern) {
    if (method == "ping") return json::object();
    std::lock_guard lock(mu_);
    if (!initialized_)
      throw RpcError{rpc_error::kInvalidRequest,
                     "Server not initialized: send \"initialize\" first (or use the 2026-07-28 "
                     "_meta envelope on every request)",
                     nullptr};
  }
  if (!modern && method == "logging/setLevel") {
    auto level = params.value("level", std::string());
    int rank = log_level_rank(level);
    if (rank < 0)
      throw invalid_params("\"level\" must be one of debug, info, notice, warning, error, "
                           "critical, alert, emergency");
    std::lock_guard lock(mu_);
    legacy_log_rank_ = rank;
    return json::object();
  }
  const MethodSpec* spec = server_.find_method(method);
  if (!spec || (modern && spec->legacy_only) || (!modern && spec->modern_only) ||
      (modern && (method == "ping" || method == "logging/setLevel"))) {
    throw RpcError{rpc_error::kMethodNotFound, "Method not found: " + method, nullptr};
  }
  if (modern && method == "tools/call") {
    // Tools that need client features say so before they run (-32021).
    const json& caps = params["_meta"][meta_key::kClientCapabilities];
    if (const ToolDefinition* def = server_.tools().find(params.value("name", std::string()));
        def && def->required_client_capabilities.is_object()) {
      json missing = json::object();
      for (const auto& [k, v] : def->required_client_capabilities.items())
        if (!caps.contains(k)) missing[k] = v;
      if (!missing.empty())
        throw RpcError{rpc_error::kMissingRequiredClientCapability,
                       "Missing required client capabilities: " + missing.dump(),
                       json{{"requiredCapabilities", missing}}};
    }
  }
  RequestContext ctx([this, id](const json& m) { emit(m, &id); }, id, env.progress_token, env.era,
                     env.version, env.log_rank, token, owner_);
  if (!modern) {
    ctx.set_requester([this, id, token](const std::string& m, json p, std::chrono::milliseconds t) {
      return request_client(m, std::move(p), id, token, t);
    });
    ctx.set_client_capabilities(client_capabilities());
  } else {
    ctx.set_client_capabilities(params["_meta"][meta_key::kClientCapabilities]);
  }
  if (close_stream_) ctx.set_stream_closer([this, id] { close_stream_(id); });
  ctx.set_detached_send([weak = weak_from_this()](const json& m) {
    if (auto self = weak.lock()) self->emit(m, nullptr);
  });
  if (modern) {
    std::optional<json> state;
    if (auto st = params.find("requestState"); st != params.end()) {
      if (!st->is_string() || !(state = verify_request_state(server_.state_key(), method, st->get<std::string>())))
        throw invalid_params(
            "\"requestState\" failed its integrity check: send it back exactly as the previous result gave it, "
            "or start over without it");
    }
    json responses;
    if (auto r = params.find("inputResponses"); r != params.end()) {
      if (!r->is_object())
        throw invalid_params("\"inputResponses\" must be an object keyed like the inputRequests it answers");
      for (const auto& [key, value] : r->items())
        if (!value.is_object())
          throw invalid_params("inputResponses." + key +
                               " must be the result object of that input request (an ElicitResult, "
                               "CreateMessageResult or ListRootsResult)");
      responses = *r;
    }
    ctx.set_input_round(std::move(responses), std::move(state));
  }
  std::string memo_key;
  if (spec->memoize) {
    json key_params = params;
    key_params.erase("_meta");
    memo_key = (modern ? "modern " : "legacy ") + method + " " + std::to_string(server_.tools().size()) + " " +
               key_params.dump();
    if (auto hit = server_.memo_get(memo_key)) return preserialized(*hit);
  }
  json result;
  try {
    result = spec->handler(params, ctx);
  } catch (const InputRequired& more) {
    if (!modern)
      throw RpcError{rpc_error::kInternalError,
                     "this request needs input from the client, which this era asks for with server-to-client "
                     "requests; the handler did not: a sandcastle bug",
                     nullptr};
    json r{{"inputRequests", more.input_requests}};
    if (more.state) r["requestState"] = sign_request_state(server_.state_key(), method, *more.state);
    r["resultType"] = "input_required";
    r["_meta"][meta_key::kServerInfo] = server_.server_info_json();
    return r;
  }
  if (modern) result = finish_modern(std::move(result), spec);
  if (spec->memoize) {
    auto text = std::make_shared<const std::string>(dump_message(result));
    server_.memo_put(memo_key, text);
    return preserialized(*text);
  }
  return result;
}

json Session::initialize(const json& params) {
  auto v = params.find("protocolVersion");
  if (v == params.end() || !v->is_string())
    throw invalid_params("initialize needs \"protocolVersion\" (a string such as \"" +
                         std::string(kLatestLegacyVersion) + "\")");
  std::lock_guard lock(mu_);
  if (initialized_)
    throw RpcError{rpc_error::kInvalidRequest,
                   "Already initialized: this session negotiated " + negotiated_version_, nullptr};
  negotiated_version_ = negotiate_legacy_version(v->get<std::string>());
  initialized_ = true;
  legacy_log_rank_ = log_level_rank(server_.options().default_log_level);
  if (auto caps = params.find("capabilities"); caps != params.end() && caps->is_object())
    client_capabilities_ = *caps;
  if (params.contains("clientInfo") && params["clientInfo"].is_object())
    spdlog::info("client {} {} initialized with protocol {}",
                 params["clientInfo"].value("name", std::string("?")),
                 params["clientInfo"].value("version", std::string("?")), negotiated_version_);
  json result{{"protocolVersion", negotiated_version_},
              {"capabilities", server_.capabilities()},
              {"serverInfo", server_.server_info_json()}};
  add_task_capabilities(result["capabilities"], Era::kLegacy, negotiated_version_);
  if (!server_.info().instructions.empty()) result["instructions"] = server_.info().instructions;
  return result;
}

json Session::finish_modern(json result, const MethodSpec* spec) const {
  if (!result.contains("resultType"))
    result["resultType"] = "complete";  // "task": a CreateTaskResult
  result["_meta"][meta_key::kServerInfo] = server_.server_info_json();
  if (!spec || spec->cacheable) {
    result["ttlMs"] = spec ? spec->ttl_ms : 0;
    result["cacheScope"] = (spec && spec->cache_public) ? "public" : "private";
  }
  return result;
}

bool Session::shutdown(std::chrono::milliseconds finish, std::chrono::milliseconds cancel) {
  std::unique_lock lock(mu_);
  // First let running requests finish and answer; then cancel what is left.
  if (idle_cv_.wait_for(lock, finish, [this] { return running_ == 0; })) return true;
  cancelling_ = true;
  std::vector<std::shared_ptr<Inflight>> entries;
  for (auto& [_, e] : inflight_) entries.push_back(e);
  lock.unlock();
  for (auto& e : entries) e->token.cancel();
  lock.lock();
  return idle_cv_.wait_for(lock, cancel, [this] { return running_ == 0; });
}

}  // namespace sandcastle::mcp
