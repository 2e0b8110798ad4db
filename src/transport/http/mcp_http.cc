#include "transport/http/mcp_http.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/crypto.h"
#include "common/metrics.h"
#include "mcp/protocol.h"
#include "mcp/session.h"

namespace sandcastle::transport::http {

using mcp::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kSseContentType = "text/event-stream";

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

json rpc_error_body(const json& id, int code, const std::string& message) {
  return mcp::make_error(id, code, message);
}

Response rpc_error_response(int status, const json& id, int code, const std::string& message) {
  return Response::json(status, mcp::dump_message(rpc_error_body(id, code, message)));
}

Headers sse_headers() {
  return {{"Content-Type", kSseContentType},
          {"Cache-Control", "no-cache, no-transform"},
          {"X-Accel-Buffering", "no"}};
}

std::string sse_event(const std::string& id, const std::string& event, const std::string& data) {
  std::string out;
  if (!id.empty()) out += "id: " + id + "\n";
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + data + "\n\n";
  return out;
}

bool is_final_for(const json& msg) {
  // A response (result or error) or a batch reply; notifications and our own
  // requests to the client are not.
  if (msg.is_array()) return true;
  return msg.is_object() && msg.contains("id") && (msg.contains("result") || msg.contains("error")) &&
         !msg.contains("method");
}

metrics::Gauge& sse_gauge() {
  return metrics::registry().gauge(metrics::name::kSseStreams, "SSE streams open");
}

std::string new_session_id() { return crypto::hex(crypto::random_bytes(16)); }

}  // namespace

std::string presented_key(const Request& req) {
  const std::string& auth = req.header("authorization");
  if (auth.size() > 7 && lower(auth.substr(0, 7)) == "bearer ") {
    auto v = auth.substr(7);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  if (const std::string& k = req.header("x-api-key"); !k.empty()) return k;
  if (auto it = req.query.find("api_key"); it != req.query.end()) return it->second;
  return {};
}

bool host_allowed(const std::string& host_header, const std::vector<std::string>& allowed) {
  if (allowed.empty()) return true;
  std::string host = lower(host_header);
  // Strip the port: "[::1]:8181" → "[::1]", "localhost:8181" → "localhost".
  if (!host.empty() && host.front() == '[') {
    auto close = host.find(']');
    if (close != std::string::npos) host = host.substr(0, close + 1);
  } else if (auto colon = host.rfind(':'); colon != std::string::npos && host.find(':') == colon) {
    host = host.substr(0, colon);
  }
  for (const auto& a : allowed)
    if (lower(a) == host) return true;
  return false;
}

bool is_loopback_origin(const std::string& origin) {
  std::string o = lower(origin);
  for (const char* scheme : {"http://", "https://"}) {
    if (o.rfind(scheme, 0) != 0) continue;
    std::string rest = o.substr(std::string(scheme).size());
    for (const char* h : {"localhost", "127.0.0.1", "[::1]"}) {
      std::string hs(h);
      if (rest == hs || rest.rfind(hs + ":", 0) == 0) return true;
    }
  }
  return false;
}

std::string decode_header_value(const std::string& v) {
  if (v.size() >= 12 && v.rfind("=?base64?", 0) == 0 && v.substr(v.size() - 2) == "?=") {
    bool ok = false;
    auto decoded = crypto::base64_decode(std::string_view(v).substr(9, v.size() - 11), &ok);
    if (ok) return decoded;
  }
  return v;
}

// ---------------------------------------------------------------------------

// One response stream of a legacy session: a POST's answer, or the standalone
// GET stream (id 0). Events are kept (bounded) so a client can resume.
struct Stream {
  uint64_t id = 0;
  std::deque<std::pair<uint64_t, std::string>> log;  // seq → framed SSE event
  uint64_t next_seq = 1;
  std::shared_ptr<Exchange> sink;  // attached response, if any
  bool sink_is_sse = false;
  bool json_ok = true;
  bool sse_ok = true;
  std::set<std::string> awaiting;  // request ids (dump) still unanswered
  bool finished = false;
  Headers extra_headers;  // e.g. Mcp-Session-Id on the initialize response
  Clock::time_point finished_at{};
};

struct HttpSession {
  enum class Kind { kStreamable, kSse };
  Kind kind = Kind::kStreamable;
  std::string id;
  std::string owner;
  std::string key_id;  // "" when anonymous
  std::shared_ptr<mcp::Session> mcp;
  std::mutex mu;
  std::map<std::string, uint64_t> route;  // request id (dump) → stream id
  std::map<uint64_t, Stream> streams;
  uint64_t next_stream = 1;
  Clock::time_point last_seen = Clock::now();
  bool ended = false;
  bool priming = false;  // 2025-11-25+: priming events with retry:
};

struct McpHttp::State : std::enable_shared_from_this<McpHttp::State> {
  State(const mcp::Server& s, McpHttpOptions o) : server(s), options(std::move(o)) {}

  const mcp::Server& server;
  McpHttpOptions options;
  Server* http = nullptr;
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<HttpSession>> sessions;
  std::set<std::shared_ptr<mcp::Session>> stateless;  // modern-era requests in flight
  std::atomic<bool> stopping{false};

  // ---- helpers ------------------------------------------------------------
  void add_cors(const Request& req, Headers& h) const {
    if (options.cors_origins.empty()) return;
    const std::string& origin = req.header("origin");
    if (origin.empty()) return;
    bool any = std::find(options.cors_origins.begin(), options.cors_origins.end(), "*") != options.cors_origins.end();
    if (!any && std::find(options.cors_origins.begin(), options.cors_origins.end(), origin) == options.cors_origins.end())
      return;
    h.emplace_back("Access-Control-Allow-Origin", any ? "*" : origin);
    h.emplace_back("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate");
    if (!any) h.emplace_back("Vary", "Origin");
  }

  void keepalive(std::weak_ptr<Exchange> weak) {
    if (!http) return;
    http->schedule(options.keepalive, [self = shared_from_this(), weak] {
      auto ex = weak.lock();
      if (!ex || ex->closed() || self->stopping) return;
      ex->write(": keep-alive\n\n");
      self->keepalive(weak);
    });
  }

  void start_sse(const std::shared_ptr<Exchange>& ex, Headers extra) {
    Headers h = sse_headers();
    for (auto& kv : extra) h.push_back(std::move(kv));
    ex->start_stream(200, std::move(h));
    sse_gauge().add(1);
    ex->on_close([] { sse_gauge().add(-1); });
    keepalive(ex);
  }

  void end_sse(const std::shared_ptr<Exchange>& ex) {
    if (!ex->closed()) sse_gauge().add(-1);
    ex->finish();
  }

  // ---- legacy sessions: routing of outgoing messages ----------------------
  // Called with s->mu held.
  void append_event(HttpSession& s, Stream& st, const json& msg) {
    std::string data = mcp::dump_message(msg);
    if (s.kind == HttpSession::Kind::kSse) {
      if (st.sink) st.sink->write(sse_event("", "message", data));
      return;
    }
    uint64_t seq = st.next_seq++;
    std::string ev = sse_event(std::to_string(st.id) + "-" + std::to_string(seq), "message", data);
    st.log.emplace_back(seq, ev);
    while (st.log.size() > options.replay_events) st.log.pop_front();
    if (st.sink && st.sink_is_sse) st.sink->write(ev);
  }

  void deliver(const std::shared_ptr<HttpSession>& s, const json& msg, const json* related) {
    std::lock_guard lock(s->mu);
    if (s->ended) return;
    if (s->kind == HttpSession::Kind::kSse) {
      if (msg.is_object() && msg.contains("$close_stream")) return;
      append_event(*s, s->streams[0], msg);
      return;
    }
    uint64_t sid = 0;
    std::string key;
    if (related) {
      key = related->dump();
      if (auto it = s->route.find(key); it != s->route.end()) sid = it->second;
    }
    auto sit = s->streams.find(sid);
    if (sit == s->streams.end()) {
      if (sid != 0) return;
      sit = s->streams.emplace(0, Stream{}).first;  // standalone stream, not yet opened
    }
    Stream& st = sit->second;
    if (msg.is_object() && msg.contains("$close_stream")) {
      // SSE polling: end the response now; the client resumes with Last-Event-ID.
      if (st.sink && st.sink_is_sse) {
        end_sse(st.sink);
        st.sink.reset();
      }
      return;
    }
    bool final = false;
    if (sid != 0 && is_final_for(msg)) {
      if (msg.is_array()) {
        st.awaiting.clear();
      } else {
        st.awaiting.erase(msg["id"].dump());
      }
      for (auto it = s->route.begin(); it != s->route.end();)
        it = (it->second == sid && !st.awaiting.count(it->first)) ? s->route.erase(it) : std::next(it);
      final = st.awaiting.empty();
    }
    // A POST answered by one message goes back as plain JSON.
    if (st.sink && !st.sink_is_sse && final && st.log.empty() && st.json_ok) {
      Headers h = st.extra_headers;
      h.emplace_back("Content-Type", "application/json");
      st.sink->respond(Response{200, std::move(h), mcp::dump_message(msg)});
      s->streams.erase(sit);  // nothing to resume: no event ids were given
      return;
    }
    if (st.sink && !st.sink_is_sse) {
      if (st.sse_ok) {
        start_sse(st.sink, st.extra_headers);
        st.sink_is_sse = true;
      } else if (!final) {
        return;  // a JSON-only client gets the reply alone
      }
    }
    append_event(*s, st, msg);
    if (final) {
      st.finished = true;
      st.finished_at = Clock::now();
      if (st.sink) {
        end_sse(st.sink);
        st.sink.reset();
      }
      prune_finished(*s);
    }
  }

  // Finished streams stay resumable for a while; a busy session keeps only
  // the most recent ones. Called with s.mu held.
  void prune_finished(HttpSession& s) {
    constexpr size_t kKeep = 64;
    size_t finished = 0;
    for (const auto& [id, st] : s.streams)
      if (id != 0 && st.finished && !st.sink) ++finished;
    for (auto it = s.streams.begin(); it != s.streams.end() && finished > kKeep;) {
      if (it->first != 0 && it->second.finished && !it->second.sink) {
        it = s.streams.erase(it);
        --finished;
      } else {
        ++it;
      }
    }
  }

  std::shared_ptr<HttpSession> make_session(HttpSession::Kind kind, const std::string& key_id) {
    auto s = std::make_shared<HttpSession>();
    s->kind = kind;
    s->id = new_session_id();
    s->key_id = key_id;
    s->owner = key_id.empty() ? "session:" + s->id : "key:" + key_id;
    std::weak_ptr<HttpSession> weak = s;
    std::weak_ptr<State> wstate = weak_from_this();
    s->mcp = mcp::Session::create_routed(
        server,
        [weak, wstate](const json& msg, const json* related) {
          auto st = wstate.lock();
          auto sess = weak.lock();
          if (st && sess) st->deliver(sess, msg, related);
        },
        s->owner);
    {
      std::lock_guard lock(mu);
      sessions[s->id] = s;
    }
    metrics::registry().gauge(metrics::name::kMcpSessions, "MCP sessions live").add(1);
    return s;
  }

  // Ends a session: cancels its requests, closes its streams, and destroys
  // the sandboxes it owned unless they belong to an API key.
  void end_session(const std::shared_ptr<HttpSession>& s, const char* why) {
    {
      std::lock_guard lock(mu);
      sessions.erase(s->id);
    }
    {
      std::lock_guard lock(s->mu);
      if (s->ended) return;
      s->ended = true;
      for (auto& [_, st] : s->streams)
        if (st.sink) {
          if (st.sink_is_sse || s->kind == HttpSession::Kind::kSse) {
            end_sse(st.sink);
          } else {
            st.sink->respond(Response::text(404, "session ended"));
          }
          st.sink.reset();
        }
    }
    metrics::registry().gauge(metrics::name::kMcpSessions, "MCP sessions live").add(-1);
    spdlog::debug("session {} ended: {}", s->id, why);
    auto self = shared_from_this();
    // Cancelling may wait for handlers to unwind: never on an I/O thread.
    std::thread([self, s] {
      s->mcp->shutdown(std::chrono::milliseconds(0), std::chrono::milliseconds(2000));
      if (s->key_id.empty() && self->options.on_owner_gone) self->options.on_owner_gone(s->owner);
    }).detach();
  }

  std::shared_ptr<HttpSession> find_session(const std::string& id) {
    std::lock_guard lock(mu);
    auto it = sessions.find(id);
    return it == sessions.end() ? nullptr : it->second;
  }

  void sweep() {
    if (!http || stopping) return;
    std::vector<std::shared_ptr<HttpSession>> expired;
    auto now = Clock::now();
    {
      std::lock_guard lock(mu);
      for (auto& [id, s] : sessions) {
        std::lock_guard slock(s->mu);
        bool attached = false;
        for (auto it = s->streams.begin(); it != s->streams.end();) {
          if (it->second.sink) attached = true;
          // Finished POST streams are kept a while for resumption, then dropped.
          if (it->first != 0 && it->second.finished && !it->second.sink &&
              now - it->second.finished_at > std::chrono::minutes(5))
            it = s->streams.erase(it);
          else
            ++it;
        }
        if (!attached && s->mcp->inflight() == 0 && now - s->last_seen > options.session_idle_ttl)
          expired.push_back(s);
      }
    }
    for (auto& s : expired) end_session(s, "idle");
    http->schedule(std::chrono::seconds(30), [self = shared_from_this()] { self->sweep(); });
  }
};

// ---------------------------------------------------------------------------

McpHttp::McpHttp(const mcp::Server& server, McpHttpOptions options)
    : state_(std::make_shared<State>(server, std::move(options))) {}

McpHttp::~McpHttp() = default;

void McpHttp::attach(Server& http) {
  state_->http = &http;
  http.schedule(std::chrono::seconds(30), [s = state_] { s->sweep(); });
}

size_t McpHttp::session_count() const {
  std::lock_guard lock(state_->mu);
  return state_->sessions.size();
}

void McpHttp::shutdown(std::chrono::milliseconds finish, std::chrono::milliseconds cancel) {
  auto& st = *state_;
  st.stopping = true;
  std::vector<std::shared_ptr<HttpSession>> sessions;
  std::vector<std::shared_ptr<mcp::Session>> stateless;
  {
    std::lock_guard lock(st.mu);
    for (auto& [_, s] : st.sessions) sessions.push_back(s);
    stateless.assign(st.stateless.begin(), st.stateless.end());
  }
  std::vector<std::shared_ptr<mcp::Session>> all = stateless;
  for (auto& s : sessions) all.push_back(s->mcp);
  // Let everything in flight answer, then cancel what is left, all at once.
  auto deadline = Clock::now() + finish;
  auto busy = [&] {
    for (auto& m : all)
      if (m->inflight() > 0) return true;
    return false;
  };
  while (busy() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::vector<std::thread> cancels;
  for (auto& m : all)
    if (m->inflight() > 0) cancels.emplace_back([m, cancel] { m->shutdown(std::chrono::milliseconds(0), cancel); });
  for (auto& t : cancels) t.join();
  for (auto& s : sessions) {
    {
      std::lock_guard lock(st.mu);
      st.sessions.erase(s->id);
    }
    std::lock_guard lock(s->mu);
    s->ended = true;
    for (auto& [_, stream] : s->streams)
      if (stream.sink) {
        if (stream.sink_is_sse || s->kind == HttpSession::Kind::kSse) {
          stream.sink->finish();
        } else {
          stream.sink->respond(Response::text(503, "server shutting down"));
        }
        stream.sink.reset();
      }
    if (s->key_id.empty() && st.options.on_owner_gone) st.options.on_owner_gone(s->owner);
  }
}

// ---------------------------------------------------------------------------

namespace {

struct Ctx {
  McpHttp::State& st;
  Request& req;
  std::shared_ptr<Exchange>& ex;
  Headers cors;
  std::string key_id;

  void reply(Response r) {
    for (auto& h : cors) r.headers.push_back(h);
    ex->respond(std::move(r));
  }
};

void handle_modern_post(Ctx& c, const json& body) {
  auto& st = c.st;
  const std::string& method = body["method"].get_ref<const std::string&>();
  const json params = body.value("params", json::object());
  const json& meta = params.is_object() && params.contains("_meta") ? params["_meta"] : json();
  std::string body_version = meta.is_object() ? meta.value(mcp::meta_key::kProtocolVersion, std::string()) : "";
  const bool is_request = body.contains("id");
  json id = is_request ? body["id"] : json();
  auto mismatch = [&](const std::string& what) {
    c.reply(rpc_error_response(400, id, mcp::rpc_error::kHeaderMismatch, "Header mismatch: " + what));
  };
  // The _meta envelope itself: -32602 with HTTP 400 when it is incomplete.
  auto invalid = [&](const std::string& what) {
    c.reply(rpc_error_response(400, id, mcp::rpc_error::kInvalidParams, "Invalid params: " + what));
  };
  if (!meta.is_object()) return invalid("the 2026-07-28 protocol requires params._meta on every request");
  if (body_version.empty())
    return invalid(std::string("params._meta is missing \"") + mcp::meta_key::kProtocolVersion + "\"");
  if (is_request && (!meta.contains(mcp::meta_key::kClientCapabilities) ||
                     !meta[mcp::meta_key::kClientCapabilities].is_object()))
    return invalid(std::string("params._meta is missing \"") + mcp::meta_key::kClientCapabilities +
                   "\" (an object; required for protocol version " + body_version + ")");
  const std::string hv = c.req.header("mcp-protocol-version");
  if (hv.empty()) return mismatch("the MCP-Protocol-Version header is required (expected " + body_version + ")");
  if (hv != body_version)
    return mismatch("MCP-Protocol-Version header '" + hv + "' does not match _meta " +
                    mcp::meta_key::kProtocolVersion + " '" + body_version + "'");
  const std::string hm = decode_header_value(c.req.header("mcp-method"));
  if (hm.empty()) return mismatch("the Mcp-Method header is required (expected " + method + ")");
  if (hm != method) return mismatch("Mcp-Method header '" + hm + "' does not match the body's method '" + method + "'");
  std::string name_field = method == "resources/read" ? "uri" : "name";
  if (method == "tools/call" || method == "prompts/get" || method == "resources/read") {
    std::string expected = params.is_object() ? params.value(name_field, std::string()) : "";
    const std::string hn = decode_header_value(c.req.header("mcp-name"));
    if (!c.req.has_header("mcp-name"))
      return mismatch("the Mcp-Name header is required for " + method + " (expected '" + expected + "')");
    if (hn != expected)
      return mismatch("Mcp-Name header '" + hn + "' does not match params." + name_field + " '" + expected + "'");
  }
  if (!is_request) {
    c.reply(Response{202, {}, {}});
    return;
  }
  const std::string& accept = c.req.header("accept");
  const bool sse_ok = accept.find(kSseContentType) != std::string::npos;
  auto ex = c.ex;
  Headers cors = c.cors;
  auto state = st.shared_from_this();
  // The stream of this one request: plain JSON when the reply is the first
  // message, SSE as soon as a notification precedes it.
  struct Pending {
    std::mutex mu;
    bool sse = false;
    bool done = false;
    std::shared_ptr<mcp::Session> session;
  };
  auto pending = std::make_shared<Pending>();
  auto session = mcp::Session::create_routed(
      st.server,
      [pending, ex, cors, state, sse_ok, id](const json& msg, const json*) {
        if (msg.is_object() && msg.contains("$close_stream")) return;
        std::lock_guard lock(pending->mu);
        if (pending->done) return;
        bool final = is_final_for(msg) && msg["id"] == id;
        if (final) {
          pending->done = true;
          if (!pending->sse) {
            int status = 200;
            if (msg.contains("error")) {
              int code = msg["error"].value("code", 0);
              if (code == mcp::rpc_error::kHeaderMismatch || code == mcp::rpc_error::kUnsupportedProtocolVersion ||
                  code == mcp::rpc_error::kMissingRequiredClientCapability)
                status = 400;
              else if (code == mcp::rpc_error::kMethodNotFound)
                status = 404;
            }
            Headers h = cors;
            h.emplace_back("Content-Type", "application/json");
            ex->respond(Response{status, std::move(h), mcp::dump_message(msg)});
          } else {
            ex->write(sse_event("", "message", mcp::dump_message(msg)));
            state->end_sse(ex);
          }
          std::lock_guard slock(state->mu);
          state->stateless.erase(pending->session);
          pending->session.reset();
          return;
        }
        if (!sse_ok) return;  // a JSON-only client gets the reply alone
        if (!pending->sse) {
          pending->sse = true;
          state->start_sse(ex, cors);
        }
        ex->write(sse_event("", "message", mcp::dump_message(msg)));
      },
      c.key_id.empty() ? std::string() : "key:" + c.key_id);
  {
    std::lock_guard lock(st.mu);
    st.stateless.insert(session);
  }
  {
    std::lock_guard lock(pending->mu);
    if (!pending->done) pending->session = session;
  }
  // Closing the stream cancels the request (2026-07-28).
  std::weak_ptr<mcp::Session> weak = session;
  ex->on_close([weak, id, state, pending] {
    auto s = weak.lock();
    if (!s) return;
    s->handle_json(json{{"jsonrpc", "2.0"},
                        {"method", "notifications/cancelled"},
                        {"params", {{"requestId", id}, {"reason", "the client closed the HTTP stream"}}}});
    std::lock_guard lock(pending->mu);
    pending->done = true;
    pending->session.reset();
    std::lock_guard slock(state->mu);
    state->stateless.erase(s);
  });
  session->handle_json(body);
}

// Registers a POST's requests on a fresh stream of the session and attaches
// the response to it.
void open_post_stream(Ctx& c, const std::shared_ptr<HttpSession>& s, const std::vector<json>& ids,
                      bool sse_now, Headers extra) {
  const std::string& accept = c.req.header("accept");
  std::lock_guard lock(s->mu);
  uint64_t sid = s->next_stream++;
  Stream& stream = s->streams[sid];
  stream.id = sid;
  stream.json_ok = accept.find("application/json") != std::string::npos || accept.find("*/*") != std::string::npos ||
                   accept.empty();
  stream.sse_ok = accept.find(kSseContentType) != std::string::npos;
  for (auto& h : c.cors) extra.push_back(h);
  stream.extra_headers = std::move(extra);
  for (const auto& id : ids) {
    stream.awaiting.insert(id.dump());
    s->route[id.dump()] = sid;
  }
  stream.sink = c.ex;
  if (sse_now && stream.sse_ok) {
    c.st.start_sse(c.ex, stream.extra_headers);
    stream.sink_is_sse = true;
    if (s->priming) {
      std::string prime = "id: " + std::to_string(sid) + "-0\nretry: " + std::to_string(c.st.options.retry_ms) +
                          "\ndata: \n\n";
      c.ex->write(prime);
    }
  }
}

void handle_legacy_post(Ctx& c, const json& body) {
  auto& st = c.st;
  const std::string& sid_header = c.req.header("mcp-session-id");
  const bool batch = body.is_array();
  auto is_initialize = [](const json& m) {
    return m.is_object() && m.value("method", std::string()) == "initialize" && m.contains("id");
  };
  std::shared_ptr<HttpSession> s;
  Headers extra;
  if (sid_header.empty()) {
    if (!is_initialize(body)) {
      c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Bad Request: the Mcp-Session-Id header is required (send initialize first to "
                                 "get one, or use the 2026-07-28 _meta envelope)"));
      return;
    }
    {
      std::lock_guard lock(st.mu);
      if (st.sessions.size() >= st.options.max_sessions) {
        c.reply(rpc_error_response(503, body["id"], mcp::rpc_error::kInternalError,
                                   "too many sessions; try again later"));
        return;
      }
    }
    s = st.make_session(HttpSession::Kind::kStreamable, c.key_id);
    extra.emplace_back("Mcp-Session-Id", s->id);
    std::string v = body.value("params", json::object()).value("protocolVersion", std::string());
    s->priming = mcp::negotiate_legacy_version(v) >= "2025-11-25";
  } else {
    s = st.find_session(sid_header);
    if (!s || s->kind != HttpSession::Kind::kStreamable || s->key_id != c.key_id) {
      c.reply(rpc_error_response(404, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Session not found: it ended or expired; initialize a new one"));
      return;
    }
    if (is_initialize(body)) {
      c.reply(rpc_error_response(400, body["id"], mcp::rpc_error::kInvalidRequest,
                                 "Already initialized: this session exists; send initialize without "
                                 "Mcp-Session-Id to start a new one"));
      return;
    }
  }
  {
    std::lock_guard lock(s->mu);
    s->last_seen = Clock::now();
  }
  // The requests in this POST (responses and notifications need no stream).
  std::vector<json> ids;
  bool tool_call = false;
  auto collect = [&](const json& m) {
    auto k = mcp::classify(m);
    if (k.kind == mcp::MessageKind::kRequest || (k.kind == mcp::MessageKind::kInvalid && !k.id.is_null())) {
      ids.push_back(m["id"]);
      if (m.value("method", std::string()) == "tools/call") tool_call = true;
    }
  };
  if (batch) {
    if (s->mcp->negotiated_version() != mcp::kBatchVersion) {
      c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Invalid Request: JSON-RPC batches are accepted only when protocol version " +
                                     std::string(mcp::kBatchVersion) + " was negotiated"));
      return;
    }
    for (const auto& m : body) collect(m);
  } else {
    collect(body);
  }
  if (ids.empty()) {
    c.reply(Response{202, c.cors, {}});
    s->mcp->handle_json(body);
    return;
  }
  {
    std::lock_guard lock(s->mu);
    for (const auto& id : ids)
      if (s->route.count(id.dump())) {
        c.reply(rpc_error_response(200, id, mcp::rpc_error::kInvalidRequest,
                                   "Invalid Request: a request with id " + id.dump() + " is already in flight"));
        return;
      }
  }
  // A tools/call opens its SSE stream at once when the session polls
  // (2025-11-25: a priming event lets the client resume a closed stream);
  // otherwise the first message decides between JSON and SSE.
  open_post_stream(c, s, ids, tool_call && s->priming, std::move(extra));
  // A dropped connection is not a cancellation: the stream lives on for resumption.
  std::weak_ptr<HttpSession> weak = s;
  auto ex = c.ex;
  ex->on_close([weak, ex] {
    auto sess = weak.lock();
    if (!sess) return;
    std::lock_guard lock(sess->mu);
    for (auto& [_, stream] : sess->streams)
      if (stream.sink == ex) stream.sink.reset();
  });
  s->mcp->handle_json(body);
}

void handle_legacy_get(Ctx& c) {
  auto& st = c.st;
  const std::string& sid_header = c.req.header("mcp-session-id");
  if (sid_header.empty()) {
    c.reply(Response::text(400, "Bad Request: the Mcp-Session-Id header is required"));
    return;
  }
  auto s = st.find_session(sid_header);
  if (!s || s->kind != HttpSession::Kind::kStreamable || s->key_id != c.key_id) {
    c.reply(Response::text(404, "Session not found"));
    return;
  }
  if (c.req.header("accept").find(kSseContentType) == std::string::npos) {
    c.reply(Response::text(406, "Not Acceptable: GET needs Accept: text/event-stream"));
    return;
  }
  std::unique_lock lock(s->mu);
  s->last_seen = Clock::now();
  const std::string& last = c.req.header("last-event-id");
  uint64_t stream_id = 0, after = 0;
  bool resume = false;
  if (!last.empty()) {
    auto dash = last.find('-');
    try {
      if (dash == std::string::npos) throw std::invalid_argument("no dash");
      stream_id = std::stoull(last.substr(0, dash));
      after = std::stoull(last.substr(dash + 1));
      resume = s->streams.count(stream_id) != 0;
    } catch (const std::exception&) {
      resume = false;
    }
  }
  if (!resume) stream_id = 0;
  Stream& stream = s->streams[stream_id];
  stream.id = stream_id;
  if (stream.sink && !stream.sink->closed()) {
    c.reply(Response::text(409, "Conflict: this session's stream is already open on another connection"));
    return;
  }
  stream.sink = c.ex;
  stream.sink_is_sse = true;
  stream.sse_ok = true;
  Headers h = c.cors;
  st.start_sse(c.ex, h);
  if (s->priming && !resume)
    c.ex->write("id: 0-0\nretry: " + std::to_string(st.options.retry_ms) + "\ndata: \n\n");
  for (const auto& [seq, ev] : stream.log)
    if (!resume || seq > after) c.ex->write(ev);
  if (stream_id == 0) stream.log.clear();  // the standalone stream delivers once
  if (stream.finished && stream_id != 0) {
    st.end_sse(c.ex);
    stream.sink.reset();
    return;
  }
  lock.unlock();
  std::weak_ptr<HttpSession> weak = s;
  auto ex = c.ex;
  ex->on_close([weak, ex, stream_id] {
    auto sess = weak.lock();
    if (!sess) return;
    std::lock_guard guard(sess->mu);
    auto it = sess->streams.find(stream_id);
    if (it != sess->streams.end() && it->second.sink == ex) it->second.sink.reset();
  });
}

void handle_legacy_delete(Ctx& c) {
  const std::string& sid_header = c.req.header("mcp-session-id");
  if (sid_header.empty()) {
    c.reply(Response::text(400, "Bad Request: the Mcp-Session-Id header is required"));
    return;
  }
  auto s = c.st.find_session(sid_header);
  if (!s || s->kind != HttpSession::Kind::kStreamable || s->key_id != c.key_id) {
    c.reply(Response::text(404, "Session not found"));
    return;
  }
  c.st.end_session(s, "DELETE");
  c.reply(Response{200, c.cors, {}});
}

bool is_modern_message(const json& body, const Request& req) {
  if (body.is_object()) {
    const json params = body.value("params", json::object());
    if (params.is_object() && params.contains("_meta") && params["_meta"].is_object() &&
        params["_meta"].contains(mcp::meta_key::kProtocolVersion) && body.value("method", std::string()) != "initialize")
      return true;
  }
  const std::string& hv = req.header("mcp-protocol-version");
  return !hv.empty() && !mcp::is_legacy_version(hv) && req.header("mcp-session-id").empty() &&
         !(body.is_object() && body.value("method", std::string()) == "initialize");
}

void handle_mcp(Ctx& c) {
  const std::string& hv = c.req.header("mcp-protocol-version");
  if (c.req.method == "POST") {
    const std::string& ct = lower(c.req.header("content-type"));
    if (ct.find("application/json") == std::string::npos) {
      c.reply(rpc_error_response(415, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Unsupported Media Type: POST a JSON-RPC message with Content-Type: application/json"));
      return;
    }
    const std::string& accept = c.req.header("accept");
    if (!accept.empty() && accept.find("application/json") == std::string::npos &&
        accept.find(kSseContentType) == std::string::npos && accept.find("*/*") == std::string::npos) {
      c.reply(rpc_error_response(406, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Not Acceptable: Accept must include application/json and text/event-stream"));
      return;
    }
    json body;
    try {
      body = json::parse(c.req.body);
    } catch (const json::exception& e) {  // parse_error, and out_of_range for 1E1111
      c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kParseError,
                                 std::string("Parse error: the body is not valid JSON (UTF-8): ") + e.what()));
      return;
    }
    if (!body.is_array()) {
      auto k = mcp::classify(body);
      if (k.kind == mcp::MessageKind::kInvalid) {
        c.reply(rpc_error_response(400, k.id, mcp::rpc_error::kInvalidRequest, "Invalid Request: " + k.why));
        return;
      }
    } else if (body.empty()) {
      c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kInvalidRequest, "Invalid Request: empty batch"));
      return;
    }
    if (!hv.empty() && !mcp::is_legacy_version(hv) && body.is_object() &&
        body.value("method", std::string()) == "initialize") {
      c.reply(rpc_error_response(404, body.value("id", json()), mcp::rpc_error::kMethodNotFound,
                                 "Method not found: initialize does not exist in protocol version " + hv +
                                     " (no handshake; send _meta on every request)"));
      return;
    }
    if (is_modern_message(body, c.req)) {
      if (!body.is_object() || !body.contains("method")) {
        c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kInvalidRequest,
                                   "Invalid Request: the 2026-07-28 protocol takes one request or notification per POST"));
        return;
      }
      handle_modern_post(c, body);
      return;
    }
    if (!hv.empty() && !mcp::is_legacy_version(hv)) {
      c.reply(rpc_error_response(400, nullptr, mcp::rpc_error::kInvalidRequest,
                                 "Bad Request: unsupported MCP-Protocol-Version '" + hv + "'"));
      return;
    }
    handle_legacy_post(c, body);
    return;
  }
  if (!hv.empty() && !mcp::is_legacy_version(hv)) {
    // The 2026-07-28 protocol is POST only.
    Response r = Response::text(405, "Method Not Allowed: protocol version " + hv + " uses POST only");
    r.headers.emplace_back("Allow", "POST");
    c.reply(std::move(r));
    return;
  }
  if (c.req.method == "GET") return handle_legacy_get(c);
  if (c.req.method == "DELETE") return handle_legacy_delete(c);
  Response r = Response::text(405, "Method Not Allowed");
  r.headers.emplace_back("Allow", "GET, POST, DELETE");
  c.reply(std::move(r));
}

void handle_sse_open(Ctx& c) {
  auto s = c.st.make_session(HttpSession::Kind::kSse, c.key_id);
  {
    std::lock_guard lock(s->mu);
    Stream& stream = s->streams[0];
    stream.sink = c.ex;
    stream.sink_is_sse = true;
    c.st.start_sse(c.ex, c.cors);
    c.ex->write(sse_event("", "endpoint", "/messages?sessionId=" + s->id));
  }
  // The stream is the session: when it closes, the session ends.
  std::weak_ptr<HttpSession> weak = s;
  auto state = c.st.shared_from_this();
  c.ex->on_close([weak, state] {
    if (auto sess = weak.lock()) state->end_session(sess, "SSE stream closed");
  });
}

void handle_sse_message(Ctx& c) {
  auto it = c.req.query.find("sessionId");
  if (it == c.req.query.end()) {
    c.reply(Response::text(400, "Bad Request: sessionId is required"));
    return;
  }
  auto s = c.st.find_session(it->second);
  // The session id is the capability here (clients drop ?api_key= from the
  // endpoint URL); a different key presented is refused all the same.
  if (!s || s->kind != HttpSession::Kind::kSse || (!c.key_id.empty() && s->key_id != c.key_id)) {
    c.reply(Response::text(404, "Session not found"));
    return;
  }
  json body;
  try {
    body = json::parse(c.req.body);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for 1E1111
    c.reply(Response::text(400, std::string("Parse error: ") + e.what()));
    return;
  }
  {
    std::lock_guard lock(s->mu);
    s->last_seen = Clock::now();
  }
  c.reply(Response{202, c.cors, "Accepted"});
  s->mcp->handle_json(body);
}

}  // namespace

void McpHttp::handle(Request&& req, std::shared_ptr<Exchange> ex) {
  auto& st = *state_;
  Ctx c{st, req, ex, {}, {}};
  if (req.path == "/healthz" && req.method == "GET") {
    c.reply(Response::json(200, R"({"status":"ok"})"));
    return;
  }
  // DNS-rebinding protection: a page on another site must not reach us.
  if (!host_allowed(req.header("host"), st.options.allowed_hosts)) {
    c.reply(Response::json(403, R"({"error":"Forbidden: Host header not allowed"})"));
    return;
  }
  if (const std::string& origin = req.header("origin"); !origin.empty()) {
    const auto& allowed = st.options.allowed_origins;
    bool ok = (st.options.allow_loopback_origins && is_loopback_origin(origin)) ||
              std::find(allowed.begin(), allowed.end(), origin) != allowed.end() ||
              std::find(allowed.begin(), allowed.end(), "*") != allowed.end();
    if (!ok) {
      c.reply(Response::json(403, R"({"error":"Forbidden: Origin not allowed"})"));
      return;
    }
  }
  st.add_cors(req, c.cors);
  if (req.method == "OPTIONS") {
    if (c.cors.empty()) {
      c.reply(Response::text(405, "Method Not Allowed"));
      return;
    }
    Response r{204, {}, {}};
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    r.headers.emplace_back("Access-Control-Allow-Headers",
                           "Content-Type, Accept, Authorization, X-API-Key, Mcp-Session-Id, MCP-Protocol-Version, "
                           "Mcp-Method, Mcp-Name, Last-Event-ID");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    c.reply(std::move(r));
    return;
  }
  if (req.path.rfind("/files/", 0) == 0) {
    if (st.options.files_handler) {
      st.options.files_handler(req, ex);
    } else {
      c.reply(Response::text(404, "Not Found"));
    }
    return;
  }
  if (st.stopping) {
    c.reply(Response::text(503, "server shutting down"));
    return;
  }
  // Authentication: a presented key must be valid; none is fine unless required.
  std::string key = presented_key(req);
  // POST /messages: clients resolve the endpoint URL without the ?api_key= of
  // the /sse URL, so the unguessable session id alone is accepted there.
  const bool session_capability = req.path == "/messages" && req.method == "POST" && key.empty();
  if (!key.empty() || (st.options.auth_required && !session_capability)) {
    std::optional<std::string> id;
    if (!key.empty() && st.options.verify_key) id = st.options.verify_key(key);
    if (!id) {
      Response r = Response::json(401, key.empty() ? R"({"error":"Unauthorized: an API key is required"})"
                                                   : R"({"error":"Unauthorized: invalid or revoked API key"})");
      r.headers.emplace_back("WWW-Authenticate",
                             key.empty() ? R"(Bearer realm="sandcastle")"
                                         : R"(Bearer realm="sandcastle", error="invalid_token")");
      c.reply(std::move(r));
      return;
    }
    c.key_id = *id;
  }
  if (req.path == "/metrics" && req.method == "GET") {
    c.reply(Response::text(200, metrics::registry().render(), "text/plain; version=0.0.4; charset=utf-8"));
    return;
  }
  if (req.path == st.options.endpoint) return handle_mcp(c);
  if (req.path == "/sse" && req.method == "GET") return handle_sse_open(c);
  if (req.path == "/messages" && req.method == "POST") return handle_sse_message(c);
  c.reply(Response::text(404, "Not Found: MCP is served at " + st.options.endpoint + " (Streamable HTTP) and /sse (HTTP+SSE)"));
}

}  // namespace sandcastle::transport::http
