// The route table every HTTP face shares (MCP endpoints, the REST API, the
// console's static files): method + path template → handler, with the
// metadata the OpenAPI document is generated from. A template is literal
// text with `{name}` (one path segment, non-empty) and at most one trailing
// `{name*}` (the rest of the path, possibly empty, slashes included).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

// Who must present what before the handler runs.
enum class RouteAuth {
  kNone,  // public (health, discovery, the console's files, signed links)
  kKey,   // an API key when auth is on (the MCP endpoints' rule)
  kApi,   // the REST API: a key, or a browser session (with CSRF on unsafe methods)
  kAdmin  // kApi, and the caller must be an admin
};

struct RouteParam {
  std::string name;
  std::string in = "query";     // "path" or "query"
  std::string type = "string";  // JSON Schema type: string, integer, boolean
  std::string description;
  bool required = false;
};

struct RouteMeta {
  std::string summary;
  std::vector<std::string> tags;
  std::vector<RouteParam> params;  // path params are added from the template when missing
  // JSON Schemas (empty: none). request_type is the body's media type.
  nlohmann::json request_schema;
  std::string request_type = "application/json";
  nlohmann::json response_schema;
  std::string response_type = "application/json";
  int success_status = 200;
  RouteAuth auth = RouteAuth::kKey;
  // In the OpenAPI document (a catch-all template cannot be expressed there).
  bool documented = true;
  // Answered before the Host/Origin checks (liveness probes from anywhere).
  bool before_host_check = false;
  // The guard and the handler may block (SQLite, service calls): they run on
  // the worker pool, never on an I/O thread.
  bool blocking = false;
};

using PathParams = std::map<std::string, std::string>;

// One dispatched request: what every handler works with.
struct Call {
  Request& req;
  std::shared_ptr<Exchange> ex;
  PathParams params;
  Headers cors;        // added to every reply
  std::string key_id;  // the authenticated key, "" when none
  // Filled in by the route's guard (kApi, kAdmin): who the caller is.
  bool admin = false;
  bool via_cookie = false;
  // What the guard holds for the request (a slot of a per-key limit):
  // released with this Call, when the handler returns.
  std::shared_ptr<void> hold{};

  void reply(Response r) {
    // The slot goes before the answer: a client that sends its next request
    // on reading this one finds it free.
    hold.reset();
    for (auto& h : cors) r.headers.push_back(h);
    ex->respond(std::move(r));
  }
  const std::string& param(const std::string& name) const;
};

using RouteHandler = std::function<void(Call&)>;

struct Route;
// Checks the caller of every route of one RouteAuth level before its
// handler runs (authentication, CSRF, Origin, per-key limits): true to go
// on, false after answering the refusal. The one place a level's rules live.
using RouteGuard = std::function<bool(Call&, const Route&)>;

struct Route {
  std::string method;  // "GET", ...; "*" answers every method (the handler decides)
  std::string path;    // the template
  RouteMeta meta;
  RouteHandler handler;
};

struct RouteMatch {
  std::shared_ptr<const Route> route;  // null: no route for this method (see allowed)
  PathParams params;
  // Methods routed on this path (for 405's Allow); empty: unknown path.
  std::vector<std::string> allowed;
};

class Router {
 public:
  // Adds a route; a template that does not parse, or a method+template
  // already present, is a programming error (returns it as kInvalidArgument).
  Status add(std::string method, std::string path, RouteMeta meta, RouteHandler handler);
  // The route for the method and the (percent-decoded) path. Literal
  // templates win over parameterised ones; earlier routes win among equals.
  RouteMatch match(const std::string& method, const std::string& path) const;
  const std::vector<std::shared_ptr<Route>>& routes() const { return routes_; }
  // The guard every route with `auth` passes first (none set: the handler runs).
  void set_guard(RouteAuth auth, RouteGuard guard);
  // Runs a matched route: its level's guard, then its handler; a blocking
  // or guarded route's on the worker pool (the Call then owns its request).
  void dispatch(std::shared_ptr<const Route> route, Call& call) const;

 private:
  std::vector<std::shared_ptr<Route>> routes_;
  std::map<RouteAuth, RouteGuard> guards_;
};

// Matches `path` against `tmpl`; fills `params` on success.
bool match_template(const std::string& tmpl, const std::string& path, PathParams* params);
// The names of the template's parameters, in order ("id", "rest*" → "rest").
std::vector<std::string> template_params(const std::string& tmpl);
// True when the template is well-formed (balanced braces, a catch-all only last).
bool valid_template(const std::string& tmpl);

// "GET, POST": the Allow field for a 405.
std::string allow_header(const std::vector<std::string>& methods);

}  // namespace sandcastle::transport::http
