// Internal to the MCP-over-HTTP transport (mcp_http*.cc): the session and
// stream state, the per-request context, and the handlers split by concern.
#pragma once

#include <spdlog/spdlog.h>

#include <atomic>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "common/crypto.h"
#include "common/json_parse.h"
#include "common/metrics.h"
#include "common/text.h"
#include "mcp/protocol.h"
#include "mcp/session.h"
#include "transport/http/mcp_http.h"

namespace sandcastle::transport::http {

using mcp::json;
using Clock = std::chrono::steady_clock;

inline constexpr const char* kSseContentType = "text/event-stream";

inline json rpc_error_body(const json& id, int code, const std::string& message) {
  return mcp::make_error(id, code, message);
}

inline Response rpc_error_response(int status, const json& id, int code, const std::string& message) {
  return Response::json(status, mcp::dump_message(rpc_error_body(id, code, message)));
}

// A POST body as JSON. Its size is bounded before it gets here (Beast's
// body_limit, --max-body-bytes: 413); parse_json bounds nesting and values.
inline Result<json> parse_body(const Request& req) {
  JsonLimits limits{req.body.size()};
  limits.bytes_setting = "--max-body-bytes";
  return parse_json(req.body, limits);
}

// 400 with -32600 for a body over a limit, -32700 for one that is not JSON.
inline Response body_refused(const Error& why) {
  return Response::json(400, mcp::dump_message(mcp::parse_failure(nullptr, why)));
}

inline Headers sse_headers() {
  return {{"Content-Type", kSseContentType},
          {"Cache-Control", "no-cache, no-transform"},
          {"X-Accel-Buffering", "no"}};
}

inline std::string sse_event(const std::string& id, const std::string& event, const std::string& data) {
  std::string out;
  if (!id.empty()) out += "id: " + id + "\n";
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + data + "\n\n";
  return out;
}

inline bool is_final_for(const json& msg) {
  // A response (result or error) or a batch reply; notifications and our own
  // requests to the client are not.
  if (msg.is_array()) return true;
  return msg.is_object() && msg.contains("id") && (msg.contains("result") || msg.contains("error")) &&
         !msg.contains("method");
}

inline metrics::Gauge& sse_gauge() {
  return metrics::registry().gauge(metrics::name::kSseStreams, "SSE streams open");
}

inline std::string new_session_id() { return crypto::hex(crypto::random_bytes(16)); }

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
  Router router;

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

  // SSE polling (RequestContext::close_stream): ends the response stream of
  // the request `related` now; the client resumes with Last-Event-ID.
  void close_stream(const std::shared_ptr<HttpSession>& s, const json& related) {
    std::lock_guard lock(s->mu);
    if (s->ended || s->kind != HttpSession::Kind::kStreamable) return;
    auto rit = s->route.find(related.dump());
    if (rit == s->route.end()) return;
    auto sit = s->streams.find(rit->second);
    if (sit == s->streams.end()) return;
    Stream& st = sit->second;
    if (st.sink && st.sink_is_sse) {
      end_sse(st.sink);
      st.sink.reset();
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
        s->owner,
        [weak, wstate](const json& related) {
          auto st = wstate.lock();
          auto sess = weak.lock();
          if (st && sess) st->close_stream(sess, related);
        });
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

// What one request's handler works with.
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

// The 2025 eras (sessions, /messages): the Mcp-Param-* headers a client sent
// must agree with each tools/call of the POST, absent ones pass (SEP-2243
// came with 2026-07-28). Replies 400 -32020 and returns true when they do not.
bool refuse_param_headers(Ctx& c, const json& body);
// The 2026-07-28 era: a stateless POST (mcp_http_modern.cc).
void handle_modern_post(Ctx& c, const json& body);
// The 2024-11-05 HTTP+SSE transport: GET /sse and POST /messages (sse_legacy.cc).
void handle_sse_open(Ctx& c);
void handle_sse_message(Ctx& c);

}  // namespace sandcastle::transport::http
