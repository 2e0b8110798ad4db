#include <algorithm>

#include "common/base64.h"
#include "common/thread_pool.h"
#include "transport/http/authority.h"
#include "transport/http/landing.h"
#include "transport/http/mcp_http_internal.h"
#include "transport/http/param_headers.h"
#include "transport/http/problem.h"
#include "web/static_assets.h"

namespace sandcastle::transport::http {


std::string presented_key(const Request& req) {
  const std::string& auth = req.header("authorization");
  if (auth.size() > 7 && ascii_lower(auth.substr(0, 7)) == "bearer ") {
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
  // The host as RFC 3986 reads it, port dropped: "localhost:80@evil.com" is
  // no host at all, not "localhost".
  auto host = parse_authority(host_header);
  if (!host) return false;
  for (const auto& a : allowed) {
    auto want = parse_authority(a);
    if (want ? want->host == host->host : ascii_lower(a) == host->host) return true;
  }
  return false;
}

bool is_loopback_origin(const std::string& origin) {
  auto o = parse_origin(origin);
  return o && (o->scheme == "http" || o->scheme == "https") && is_loopback_name(o->authority.host);
}

bool origin_allowed(const std::string& origin, const std::vector<std::string>& allowed,
                    bool allow_loopback) {
  if (std::find(allowed.begin(), allowed.end(), "*") != allowed.end()) return true;
  auto o = parse_origin(origin);
  if (!o) return false;  // "null", a list, userinfo, a path: no origin we could vouch for
  if (allow_loopback && is_loopback_origin(origin)) return true;
  for (const auto& a : allowed) {
    auto want = parse_origin(a);
    if (want && want->scheme == o->scheme && want->authority.host == o->authority.host &&
        want->authority.port == o->authority.port)
      return true;
  }
  return false;
}

std::string decode_header_value(const std::string& v) {
  if (v.size() >= 12 && v.rfind("=?base64?", 0) == 0 && v.substr(v.size() - 2) == "?=") {
    if (auto decoded = base64_decode(std::string_view(v).substr(9, v.size() - 11))) return *decoded;
  }
  return v;
}


// ---------------------------------------------------------------------------

McpHttp::McpHttp(const mcp::Server& server, McpHttpOptions options) {
  options.landing.auth_required = options.auth_required;
  options.landing.endpoint = options.endpoint;
  if (options.landing.version.empty()) options.landing.version = server.info().version;
  state_ = std::make_shared<State>(server, std::move(options));
  add_routes();
}

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

bool refuse_param_headers(Ctx& c, const json& body) {
  auto refused = [&c](const json& m) {
    auto bad = check_param_headers(c.req.headers, c.st.server.tools(), m, false);
    if (!bad) return false;
    c.reply(rpc_error_response(400, m.is_object() ? m.value("id", json()) : json(),
                               mcp::rpc_error::kHeaderMismatch, "Header mismatch: " + *bad));
    return true;
  };
  return body.is_array() ? std::any_of(body.begin(), body.end(), refused) : refused(body);
}

namespace {


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
  if (refuse_param_headers(c, body)) return;
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
    if (!resume) {
      c.reply(Response::text(
          409, "Conflict: this session's stream is already open on another connection"));
      return;
    }
    // A client that resumes has given up on the connection the stream was
    // on, often before this server has seen it go: the stream moves here,
    // and what the old one may have missed is replayed from the log below.
    st.end_sse(stream.sink);
    stream.sink.reset();
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
    const std::string& ct = ascii_lower(c.req.header("content-type"));
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
    auto parsed = parse_body(c.req);
    if (!parsed) {
      c.reply(body_refused(parsed.error()));
      return;
    }
    const json body = std::move(*parsed);
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

}  // namespace

namespace {

// 401 for a missing or bad key, with the reason and what to do in the body:
// a client that shows it tells its user; the OAuth paths (landing.h) say the same.
Response unauthorized(bool had_key) {
  Response r = Response::json(401, json{{"error", had_key ? "Unauthorized: invalid or revoked API key"
                                                           : "Unauthorized: this server requires an API key"},
                                        {"error_description", api_key_hint()}}
                                       .dump());
  r.headers.emplace_back("WWW-Authenticate",
                         had_key ? R"(Bearer realm="sandcastle", error="invalid_token")" : R"(Bearer realm="sandcastle")");
  return r;
}

bool is_api_path(const std::string& path) { return path == "/api" || path.rfind("/api/", 0) == 0; }

// After the Host, Origin and key checks: the route (kApi and kAdmin ones
// pass the guard the REST API set on the route table: keys or browser
// sessions, CSRF, Origin, per-key limits), or 405 / 404.
void route_or_refuse(McpHttp::State& st, const RouteMatch& m, Call& call, bool api) {
  const Request& req = call.req;
  if (m.route) return st.router.dispatch(m.route, call);
  if (!m.allowed.empty()) {
    Response r = api ? problem(405, "method_not_allowed", req.method + " is not allowed on " + req.path)
                     : Response::text(405, "Method Not Allowed");
    r.headers.emplace_back("Allow", allow_header(m.allowed));
    call.reply(std::move(r));
    return;
  }
  if (api) return call.reply(problem(404, "not_found", "no such API route: " + req.path));
  call.reply(Response::text(404, "Not Found: MCP is served at " + st.options.endpoint +
                                     " (Streamable HTTP) and /sse (HTTP+SSE)"));
}

}  // namespace

// The MCP face's routes; the REST API and the console add theirs to the same table.
void McpHttp::add_routes() {
  auto& st = *state_;
  auto& r = st.router;
  std::weak_ptr<State> weak = state_;
  auto with_ctx = [weak](void (*fn)(Ctx&)) {
    return [weak, fn](Call& call) {
      auto s = weak.lock();
      if (!s) return;
      Ctx c{*s, call.req, call.ex, call.cors, call.key_id};
      fn(c);
    };
  };
  RouteMeta health;
  health.summary = "Liveness probe";
  health.tags = {"server"};
  health.auth = RouteAuth::kNone;
  health.before_host_check = true;
  health.response_type = "application/json";
  (void)r.add("GET", "/healthz", health, [](Call& c) { c.reply(Response::json(200, R"({"status":"ok"})")); });

  auto public_page = [weak](Call& c) {
    auto s = weak.lock();
    if (!s) return;
    // GET / from a browser: the web console (src/web/static_assets.h).
    if (auto asset = web::answer(c.req)) return c.reply(std::move(*asset));
    if (auto page = public_answer(c.req, s->options.landing)) return c.reply(std::move(*page));
    c.reply(Response::text(404, "Not Found"));
  };
  RouteMeta landing;
  landing.summary = "What this server is and how to connect (HTML for browsers, JSON for programs)";
  landing.tags = {"server"};
  landing.auth = RouteAuth::kNone;
  landing.response_type = "text/html";
  (void)r.add("GET", "/", landing, public_page);
  RouteMeta assets;
  assets.summary = "The web console's scripts and styles (compiled into the binary)";
  assets.tags = {"server"};
  assets.auth = RouteAuth::kNone;
  assets.documented = false;
  (void)r.add("*", "/assets/{rest*}", assets, [](Call& c) {
    if (auto asset = web::answer(c.req)) return c.reply(std::move(*asset));
    c.reply(Response::text(404, "Not Found"));
  });
  RouteMeta oauth;
  oauth.summary = "OAuth discovery: this server takes API keys, not OAuth";
  oauth.tags = {"server"};
  oauth.auth = RouteAuth::kNone;
  oauth.documented = false;
  for (const char* p : {"/.well-known/oauth-protected-resource{rest*}", "/.well-known/oauth-authorization-server{rest*}",
                        "/.well-known/openid-configuration{rest*}"})
    (void)r.add("GET", p, oauth, public_page);
  oauth.documented = true;
  (void)r.add("POST", "/register", oauth, public_page);
  (void)r.add("GET", "/authorize", oauth, public_page);

  RouteMeta files;
  files.summary = "A signed file link (see the MCP tools' resource links)";
  files.tags = {"files"};
  files.auth = RouteAuth::kNone;  // the signature is the capability
  files.documented = false;
  (void)r.add("*", "/files/{token*}", files, [weak](Call& c) {
    auto s = weak.lock();
    if (s && s->options.files_handler) return s->options.files_handler(c.req, c.ex);
    c.reply(Response::text(404, "Not Found"));
  });

  RouteMeta metrics_meta;
  metrics_meta.summary = "Prometheus metrics";
  metrics_meta.tags = {"server"};
  metrics_meta.response_type = "text/plain";
  (void)r.add("GET", "/metrics", metrics_meta, [](Call& c) {
    c.reply(Response::text(200, metrics::registry().render(), "text/plain; version=0.0.4; charset=utf-8"));
  });

  RouteMeta mcp_meta;
  mcp_meta.summary = "MCP Streamable HTTP (JSON-RPC; every protocol version)";
  mcp_meta.tags = {"mcp"};
  mcp_meta.request_schema = json{{"type", json::array({"object", "array"})}};
  mcp_meta.documented = true;
  (void)r.add("*", st.options.endpoint, mcp_meta, with_ctx(handle_mcp));
  RouteMeta sse_meta;
  sse_meta.summary = "MCP HTTP+SSE (2024-11-05): the event stream";
  sse_meta.tags = {"mcp"};
  sse_meta.response_type = "text/event-stream";
  (void)r.add("GET", "/sse", sse_meta, with_ctx(handle_sse_open));
  RouteMeta msg_meta;
  msg_meta.summary = "MCP HTTP+SSE (2024-11-05): a client message";
  msg_meta.tags = {"mcp"};
  msg_meta.params = {RouteParam{"sessionId", "query", "string", "the session of the /sse stream", true}};
  msg_meta.request_schema = json{{"type", "object"}};
  msg_meta.success_status = 202;
  (void)r.add("POST", "/messages", msg_meta, with_ctx(handle_sse_message));
}

Router& McpHttp::router() { return state_->router; }

void McpHttp::handle(Request&& req, std::shared_ptr<Exchange> ex) {
  auto& st = *state_;
  RouteMatch m = st.router.match(req.method, req.path);
  Call call{req, ex, std::move(m.params), {}, {}};
  if (m.route && m.route->meta.before_host_check) return m.route->handler(call);
  const bool api = is_api_path(req.path);
  // DNS-rebinding protection: a page on another site must not reach us.
  if (!host_allowed(req.header("host"), st.options.allowed_hosts)) {
    call.reply(api ? problem(403, "forbidden", "Host header not allowed")
                   : Response::json(403, R"({"error":"Forbidden: Host header not allowed"})"));
    return;
  }
  if (req.has_header("origin")) {
    if (!origin_allowed(req.header("origin"), st.options.allowed_origins, st.options.allow_loopback_origins)) {
      call.reply(api ? problem(403, "forbidden", "Origin not allowed")
                     : Response::json(403, R"({"error":"Forbidden: Origin not allowed"})"));
      return;
    }
  }
  st.add_cors(req, call.cors);
  if (req.method == "OPTIONS") {
    if (call.cors.empty()) {
      Response r = Response::text(405, "Method Not Allowed");
      if (!m.allowed.empty()) r.headers.emplace_back("Allow", allow_header(m.allowed));
      call.reply(std::move(r));
      return;
    }
    Response r{204, {}, {}};
    r.headers.emplace_back("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE, OPTIONS");
    r.headers.emplace_back("Access-Control-Allow-Headers",
                           "Content-Type, Accept, Authorization, X-API-Key, X-CSRF-Token, Mcp-Session-Id, "
                           "MCP-Protocol-Version, Mcp-Method, Mcp-Name, Last-Event-ID");
    r.headers.emplace_back("Access-Control-Max-Age", "600");
    call.reply(std::move(r));
    return;
  }
  const RouteAuth auth = m.route ? m.route->meta.auth : (api ? RouteAuth::kApi : RouteAuth::kKey);
  if (auth == RouteAuth::kNone) return st.router.dispatch(m.route, call);
  if (st.stopping) {
    call.reply(api ? problem(503, "unavailable", "server shutting down") : Response::text(503, "server shutting down"));
    return;
  }
  if (auth == RouteAuth::kKey) {
    // Authentication: a presented key must be valid; none is fine unless required.
    std::string key = presented_key(req);
    // POST /messages: clients resolve the endpoint URL without the ?api_key= of
    // the /sse URL, so the unguessable session id alone is accepted there.
    const bool session_capability = req.path == "/messages" && req.method == "POST" && key.empty();
    if (!key.empty() || (st.options.auth_required && !session_capability)) {
      if (key.empty() || !st.options.verify_key) return call.reply(unauthorized(!key.empty()));
      // The key database may block (SQLite): the key is checked, and the
      // route then runs, on the worker pool, never on this I/O thread.
      auto owned = std::make_shared<Request>(std::move(req));
      ElasticPool::shared().submit([weak = std::weak_ptr<McpHttp::State>(state_), owned, ex = call.ex, m = std::move(m),
                                    params = std::move(call.params), cors = std::move(call.cors), key, api]() mutable {
        auto s = weak.lock();
        if (!s) return;
        Call c{*owned, ex, std::move(params), std::move(cors), {}};
        auto id = s->options.verify_key(key);
        if (!id) return c.reply(unauthorized(true));
        c.key_id = *id;
        route_or_refuse(*s, m, c, api);
      });
      return;
    }
  }
  route_or_refuse(st, m, call, api);
}

}  // namespace sandcastle::transport::http
