// MCP over HTTP: the Streamable HTTP endpoint (/mcp) for both protocol eras,
// the 2024-11-05 HTTP+SSE transport (/sse + /messages), DNS-rebinding
// protection (Host and Origin), optional CORS, API-key authentication and
// the ownership of sandboxes by key or session, /healthz and /metrics.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mcp/server.h"
#include "transport/http/http_server.h"
#include "transport/http/landing.h"
#include "transport/http/router.h"

namespace sandcastle::transport::http {

struct McpHttpOptions {
  std::string endpoint = "/mcp";
  // Host header names accepted (DNS-rebinding protection); empty: any. Ports are ignored.
  std::vector<std::string> allowed_hosts;
  // Origins accepted besides loopback ones ("https://app.example.com"); "*" accepts any.
  std::vector<std::string> allowed_origins;
  bool allow_loopback_origins = true;
  // Origins that get CORS headers; empty: no CORS at all.
  std::vector<std::string> cors_origins;

  bool auth_required = false;
  // Checks a presented API key; returns its key id, or nullopt when unknown/revoked.
  std::function<std::optional<std::string>(const std::string& key)> verify_key;
  // A session that owned sandboxes ("session:<id>") ended: destroy them.
  std::function<void(const std::string& owner)> on_owner_gone;
  // Serves /files/... (signed links); unset: 404.
  std::function<void(const Request&, std::shared_ptr<Exchange>)> files_handler;
  // GET / and the OAuth discovery paths (landing.h); auth_required is copied in.
  LandingInfo landing;

  std::chrono::milliseconds keepalive{15'000};   // ":" comments on open SSE streams
  std::chrono::seconds session_idle_ttl{3600};   // a session nobody touches expires
  size_t max_sessions = 10'000;
  size_t replay_events = 1'000;                  // per session, for Last-Event-ID
  int retry_ms = 1'000;                          // SSE retry: field on priming events
};

class McpHttp {
 public:
  McpHttp(const mcp::Server& server, McpHttpOptions options);
  ~McpHttp();
  McpHttp(const McpHttp&) = delete;
  McpHttp& operator=(const McpHttp&) = delete;

  // Attaches to the HTTP server (for timers) and starts the idle-session sweep.
  void attach(Server& http);
  // The request handler to give the HTTP server: Host/Origin checks, CORS,
  // authentication by the route's RouteAuth, then the route (404 for an
  // unknown path, 405 with Allow for a known one and another method).
  void handle(Request&& req, std::shared_ptr<Exchange> ex);
  // The shared route table (the MCP endpoints are in it; add the REST API's
  // and the console's before the server starts).
  Router& router();

  // Graceful shutdown: requests in flight get `finish` to answer, the rest are
  // cancelled (up to `cancel` to unwind), then every stream is closed and every
  // session ended.
  void shutdown(std::chrono::milliseconds finish, std::chrono::milliseconds cancel);

  size_t session_count() const;

  struct State;

 private:
  void add_routes();
  std::shared_ptr<State> state_;
};

// "Bearer x" / X-API-Key / ?api_key=: the key a request presents, or "".
std::string presented_key(const Request& req);
// Host header check: true when the field is a valid host[:port] whose host is
// one of `allowed` (ports ignored), or `allowed` is empty.
bool host_allowed(const std::string& host_header, const std::vector<std::string>& allowed);
// True for http(s)://localhost, 127.0.0.1 or [::1] with any port.
bool is_loopback_origin(const std::string& origin);
// Origin check: a well-formed serialized origin that is a loopback one (when
// `allow_loopback`) or equals an entry of `allowed` (scheme, host, port); "*"
// in `allowed` accepts any value.
bool origin_allowed(const std::string& origin, const std::vector<std::string>& allowed,
                    bool allow_loopback);
// 2026-07-28 header values: plain ASCII or "=?base64?...?=".
std::string decode_header_value(const std::string& v);

}  // namespace sandcastle::transport::http
