#include "web/rest_api.h"

#include "common/json_parse.h"
#include "common/text.h"
#include "store/key_store.h"
#include "transport/http/mcp_http.h"
#include "transport/http/problem.h"
#include "transport/http/websocket.h"
#include "web/openapi.h"

namespace sandcastle::web {

using nlohmann::json;
using transport::http::problem;
using transport::http::Response;
using transport::http::RouteMeta;

namespace {

Response unauthorized(const std::string& why) {
  Response r = problem(401, "unauthorized", why);
  r.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="sandcastle")");
  return r;
}

}  // namespace

Response too_many(const std::string& detail, int retry_after_s) {
  Response r = problem(429, "resource_exhausted", detail);
  r.headers.emplace_back("Retry-After", std::to_string(retry_after_s));
  return r;
}

bool unsafe_method(const std::string& m) {
  return m == "POST" || m == "PUT" || m == "PATCH" || m == "DELETE";
}

std::string header_key(const transport::http::Request& req) {
  const std::string& auth = req.header("authorization");
  if (auth.size() > 7 && ascii_lower(auth.substr(0, 7)) == "bearer ") {
    auto v = auth.substr(7);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return req.header("x-api-key");
}

void reply_json(Call& c, int status, const json& body) {
  Response r = Response::json(status, body.dump(-1, ' ', false, json::error_handler_t::replace));
  r.headers.emplace_back("Cache-Control", "no-store");
  c.reply(std::move(r));
}

std::optional<json> json_body(Call& c, size_t max_bytes, bool object_only) {
  if (c.req.body.empty() && !c.req.has_header("content-type")) return json::object();
  const std::string ct = ascii_lower(c.req.header("content-type"));
  if (ct.rfind("application/json", 0) != 0) {
    c.reply(
        problem(415, "unsupported_media_type", "send the body as Content-Type: application/json"));
    return std::nullopt;
  }
  if (c.req.body.size() > max_bytes) {
    c.reply(problem(413, "payload_too_large",
                    "the JSON body is " + std::to_string(c.req.body.size()) +
                        " bytes, above the limit of " + std::to_string(max_bytes)));
    return std::nullopt;
  }
  if (c.req.body.empty()) return json::object();
  JsonLimits limits{max_bytes};
  auto parsed = parse_json(c.req.body, limits);
  if (!parsed.ok()) {
    c.reply(problem(400, "invalid_argument",
                    "the body is not valid JSON: " + parsed.error().message()));
    return std::nullopt;
  }
  if (object_only && !parsed->is_object()) {
    c.reply(problem(400, "invalid_argument", "the body must be a JSON object"));
    return std::nullopt;
  }
  return std::move(*parsed);
}

RestApi::RestApi(RestOptions options)
    : options_(std::move(options)), sessions_(options_.sessions) {}

RestApi::~RestApi() {
  shutdown();
}

bool RestApi::origin_ok(const transport::http::Request& req) const {
  if (!req.has_header("origin") || transport::http::websocket_origin_ok(req)) return true;
  return transport::http::origin_allowed(req.header("origin"), options_.allowed_origins, false);
}

std::optional<Caller> RestApi::authenticate(Call& c, RouteAuth need) {
  if (!origin_ok(c.req)) {
    c.reply(problem(403, "forbidden", "a page on another origin may not use this API"));
    return std::nullopt;
  }
  std::optional<Caller> who;
  const std::string key = header_key(c.req);
  if (!key.empty()) {
    // A key in a header: no cookie, no CSRF (a browser never adds it by itself).
    std::optional<store::KeyInfo> info;
    if (options_.keys) info = options_.keys->authenticate(key);
    if (!info) {
      c.reply(unauthorized("invalid or revoked API key"));
      return std::nullopt;
    }
    who = Caller{info->id, info->admin, false};
  } else if (std::string sid = cookie_value(c.req.header("cookie"), kSessionCookie); !sid.empty()) {
    auto s = sessions_.find(sid);
    // The key may have been revoked since (by another process too): asked each time.
    std::optional<store::KeyInfo> info;
    if (s && options_.keys) info = options_.keys->find_active(s->key_id);
    if (s && !info) sessions_.remove(sid);
    if (!s || !info) {
      Response r = unauthorized(
          "the session ended (signed out, expired or its key was revoked); sign in again");
      r.headers.emplace_back("Set-Cookie", clear_session_cookie(options_.secure_cookies));
      c.reply(std::move(r));
      return std::nullopt;
    }
    if (unsafe_method(c.req.method) && !csrf_matches(*s, c.req.header("x-csrf-token"))) {
      c.reply(problem(403, "csrf",
                      c.req.has_header("x-csrf-token")
                          ? "the X-CSRF-Token does not match this session's"
                          : "a request signed in by cookie needs X-CSRF-Token"));
      return std::nullopt;
    }
    who = Caller{info->id, info->admin, true};
  } else if (!options_.auth_required) {
    who = Caller{"", true, false};  // the local user
  } else {
    c.reply(unauthorized(
        "this server requires an API key (Authorization: Bearer <key>) or a signed-in session"));
    return std::nullopt;
  }
  if (need == RouteAuth::kAdmin && !who->admin) {
    c.reply(problem(403, "forbidden",
                    "only an admin key may do this (sandcastle keys create --admin)"));
    return std::nullopt;
  }
  return who;
}

bool RestApi::guard(Call& c, const transport::http::Route& route) {
  auto who = authenticate(c, route.meta.auth);
  if (!who) return false;
  // Off the I/O threads (a guard of blocking routes runs on the workers).
  if (options_.keys && !who->key_id.empty()) options_.keys->note_used(who->key_id);
  c.key_id = who->key_id;
  c.admin = who->admin;
  c.via_cookie = who->via_cookie;
  c.hold = requests_.acquire(who->owner());
  if (!c.hold) {
    c.reply(too_many("this key has " + std::to_string(requests_.max()) +
                     " requests in progress (the most it may); retry when one ends"));
    return false;
  }
  return true;
}

void RestApi::with_service(Call& c, const std::function<void(Call&, const Caller&)>& fn) {
  if (!options_.sandboxes)
    return c.reply(problem(503, "unavailable", "the sandbox service is not available"));
  fn(c, caller_of(c));
}

void RestApi::add_routes(Router& router) {
  // Every kApi and kAdmin route passes this one check before its handler
  // (which runs on the worker pool: the check reads SQLite).
  for (RouteAuth level : {RouteAuth::kApi, RouteAuth::kAdmin})
    router.set_guard(
        level, [this](Call& c, const transport::http::Route& route) { return guard(c, route); });
  session_routes(router);
  key_routes(router);
  sandbox_routes(router);
  exec_routes(router);
  file_routes(router);
  event_routes(router);
  terminal_routes(router);
  RouteMeta doc;
  doc.summary = "This API's OpenAPI 3.1 document";
  doc.tags = {"server"};
  doc.auth = RouteAuth::kNone;
  doc.response_schema = json{{"type", "object"}};
  OpenApiInfo info{"sandcastle", options_.version,
                   "Run code in Linux sandboxes: the REST API (see also MCP at /mcp)."};
  const Router* rp = &router;
  (void)router.add("GET", "/api/v1/openapi.json", doc,
                   [rp, info](Call& c) { reply_json(c, 200, openapi_document(*rp, info)); });
}

}  // namespace sandcastle::web
