// The REST API under /api/v1 (docs/rest-api.md): its authentication (API
// keys in headers, or a browser session cookie with a CSRF token on unsafe
// methods), JSON bodies, problem+json errors, and its routes in the shared
// route table.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "transport/http/router.h"
#include "web/owner_limits.h"
#include "web/session.h"

namespace sandcastle::store {
class KeyStore;
}
namespace sandcastle::service {
class Sandboxes;
}

namespace sandcastle::web {

using transport::http::Call;
using transport::http::RouteAuth;
using transport::http::Router;

struct RestOptions {
  bool auth_required = false;
  // The cookie gets Secure (the server is reached over TLS, e.g. a public
  // https:// URL in front of it).
  bool secure_cookies = false;
  size_t max_json_bytes = size_t{1} << 20;
  store::KeyStore* keys = nullptr;  // null: no key database (auth off)
  std::string version;
  std::string backend;  // the sandbox backend's name, for /health
  SessionOptions sessions;
  // The service layer; null: the routes exist (for the OpenAPI document)
  // and answer 503.
  service::Sandboxes* sandboxes = nullptr;
  size_t max_body_bytes = size_t{16} << 20;        // the HTTP server's, for uploads
  std::chrono::milliseconds usage_interval{2000};  // events: usage diffs
  std::chrono::milliseconds keepalive{15000};      // events: comment lines
  size_t max_terminals = 64;                       // open at once, server-wide
  // Per owner (an API key; the local user is one owner): requests being
  // answered at once, open event streams, open terminals. Beyond: 429.
  size_t max_requests_per_key = 32;
  size_t max_streams_per_key = 8;
  size_t max_terminals_per_key = 8;
  // Origins besides the server's own that may call the REST API from a
  // browser (the MCP endpoints also take any loopback origin; this API does
  // not: another local page must not drive it, least of all with auth off).
  std::vector<std::string> allowed_origins;
};

// Who a REST request acts for.
struct Caller {
  std::string key_id;  // "" for the local user (auth off, no key presented)
  bool admin = false;
  bool via_cookie = false;
  // The owner string sandboxes carry: "key:<id>", or "" for the local user.
  std::string owner() const { return key_id.empty() ? std::string() : "key:" + key_id; }
};

class RestApi {
 public:
  explicit RestApi(RestOptions options);
  ~RestApi();
  RestApi(const RestApi&) = delete;
  RestApi& operator=(const RestApi&) = delete;

  // Adds every /api/v1 route: session, keys, the OpenAPI document
  // (generated from `router` as it is when asked), and the service routes
  // (sandboxes, executions, events, files, packages, images, metrics, health);
  // and sets the router's guard of kApi and kAdmin routes (authenticate,
  // the per-key request limit), so no handler checks a caller itself.
  void add_routes(Router& router);
  // Ends the event streams (server shutdown).
  void shutdown();

  // The caller of a kApi/kAdmin route, or nullopt after answering 401, 403
  // (forbidden: another origin, or not an admin; csrf: a cookie request
  // with an unsafe method and no or a wrong X-CSRF-Token). Blocks (SQLite):
  // called on the worker pool.
  std::optional<Caller> authenticate(Call& c, RouteAuth need);
  // The guard of kApi and kAdmin routes: authenticate, then a slot of the
  // caller's in-flight requests (429 with Retry-After when none is free).
  bool guard(Call& c, const transport::http::Route& route);
  SessionTable& sessions() { return sessions_; }
  // No Origin (not a browser), the server's own, or one allowed_origins names.
  bool origin_ok(const transport::http::Request& req) const;
  const RestOptions& options() const { return options_; }

 private:
  void session_routes(Router& r);
  void key_routes(Router& r);
  void sandbox_routes(Router& r);
  void exec_routes(Router& r);
  void file_routes(Router& r);
  void event_routes(Router& r);
  void terminal_routes(Router& r);
  // Runs `fn` with the caller the guard found, or answers 503 when there
  // is no sandbox service.
  void with_service(Call& c, const std::function<void(Call&, const Caller&)>& fn);

  RestOptions options_;
  SessionTable sessions_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  struct Events;
  std::shared_ptr<Events> events_;
  std::shared_ptr<std::atomic<size_t>> terminals_ = std::make_shared<std::atomic<size_t>>(0);
  OwnerLimit requests_{options_.max_requests_per_key};
  OwnerLimit streams_{options_.max_streams_per_key};
  OwnerLimit owner_terminals_{options_.max_terminals_per_key};
};

// Who the guard found a Call's caller to be.
inline Caller caller_of(const Call& c) {
  return Caller{c.key_id, c.admin, c.via_cookie};
}
// 429 resource_exhausted with Retry-After.
transport::http::Response too_many(const std::string& detail, int retry_after_s = 1);

// --- helpers for the handlers (rest_*.cc) -----------------------------------

// 2xx with a JSON body (no-store).
void reply_json(Call& c, int status, const nlohmann::json& body);
// The request's JSON body: 415 without Content-Type application/json, 413
// over `max_bytes`, 400 when it is not JSON (or not an object when
// `object_only`); nullopt after answering. An empty body is {}.
std::optional<nlohmann::json> json_body(Call& c, size_t max_bytes, bool object_only = true);
// True for POST, PUT, PATCH, DELETE.
bool unsafe_method(const std::string& method);
// The key a REST request presents in a header (Authorization: Bearer, X-API-Key).
std::string header_key(const transport::http::Request& req);

}  // namespace sandcastle::web
