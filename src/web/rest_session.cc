// /api/v1/session: a browser signs in with an API key once and then carries
// only an HttpOnly, SameSite=Strict cookie; unsafe requests also carry the
// session's CSRF token. And /api/v1/keys (admin keys only).
#include "store/key_store.h"
#include "transport/http/problem.h"
#include "web/rest_api.h"

namespace sandcastle::web {

using nlohmann::json;
using transport::http::problem;
using transport::http::Response;
using transport::http::RouteMeta;
using transport::http::RouteParam;

namespace {

// A function, not a static json: building one may throw.
json session_info_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"auth_required", {{"type", "boolean"}}},
                {"authenticated", {{"type", "boolean"}}},
                {"key_id", {{"type", "string"}}},
                {"admin", {{"type", "boolean"}}},
                {"csrf_token", {{"type", "string"}}}}}};
}

json key_json(const store::KeyInfo& k) {
  auto opt = [](const std::string& s) { return s.empty() ? json() : json(s); };
  return json{{"id", k.id},
              {"name", k.name},
              {"admin", k.admin},
              {"created_at", k.created_at},
              {"revoked_at", opt(k.revoked_at)},
              {"last_used_at", opt(k.last_used_at)}};
}

}  // namespace

void RestApi::session_routes(Router& r) {
  RouteMeta in;
  in.summary = "Sign a browser in with an API key (sets the sc_session cookie)";
  in.blocking = true;  // SQLite: off the I/O threads
  in.tags = {"session"};
  in.auth = RouteAuth::kNone;
  in.request_schema = json{{"type", "object"},
                           {"required", json::array({"api_key"})},
                           {"properties", {{"api_key", {{"type", "string"}}}}}};
  in.response_schema = session_info_schema();
  (void)r.add("POST", "/api/v1/session", in, [this](Call& c) {
    if (!origin_ok(c.req))
      return c.reply(problem(403, "forbidden", "a page on another origin may not sign in here"));
    auto body = json_body(c, 4096);
    if (!body) return;
    auto k = body->find("api_key");
    if (k == body->end() || !k->is_string() || k->get_ref<const std::string&>().empty())
      return c.reply(problem(400, "invalid_argument", "api_key (a string) is required"));
    std::optional<store::KeyInfo> info;
    if (options_.keys) info = options_.keys->authenticate(k->get<std::string>());
    if (!info) {
      Response res = problem(401, "unauthorized", "invalid or revoked API key");
      res.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="sandcastle")");
      return c.reply(std::move(res));
    }
    auto s = sessions_.create(info->id, info->admin);
    if (!s.ok()) return c.reply(problem(s.error()));
    Response res = Response::json(
        200,
        json{{"key_id", s->key_id}, {"admin", s->admin}, {"csrf_token", s->csrf_token}}.dump());
    res.headers.emplace_back("Set-Cookie", session_cookie(s->id, options_.secure_cookies));
    res.headers.emplace_back("Cache-Control", "no-store");
    c.reply(std::move(res));
  });

  RouteMeta get;
  get.summary = "Whether this browser is signed in (no key needed)";
  get.blocking = true;  // SQLite: off the I/O threads
  get.tags = {"session"};
  get.auth = RouteAuth::kNone;
  get.response_schema = session_info_schema();
  (void)r.add("GET", "/api/v1/session", get, [this](Call& c) {
    json out{{"auth_required", options_.auth_required}, {"authenticated", false}};
    const std::string key = header_key(c.req);
    if (!key.empty()) {
      if (options_.keys)
        if (auto info = options_.keys->authenticate(key)) {
          out["authenticated"] = true;
          out["key_id"] = info->id;
          out["admin"] = info->admin;
        }
    } else if (auto sid = cookie_value(c.req.header("cookie"), kSessionCookie); !sid.empty()) {
      auto s = sessions_.find(sid);
      if (s && options_.keys && options_.keys->find_active(s->key_id)) {
        out["authenticated"] = true;
        out["key_id"] = s->key_id;
        out["admin"] = s->admin;
        out["csrf_token"] = s->csrf_token;
      }
    } else if (!options_.auth_required) {
      out["authenticated"] = true;  // the local user
      out["key_id"] = "";
      out["admin"] = true;
    }
    reply_json(c, 200, out);
  });

  RouteMeta out;
  out.summary = "Sign out (ends the session, clears the cookie)";
  out.blocking = true;  // SQLite: off the I/O threads
  out.tags = {"session"};
  out.auth = RouteAuth::kApi;
  out.success_status = 204;
  (void)r.add("DELETE", "/api/v1/session", out, [this](Call& c) {
    if (c.via_cookie) sessions_.remove(cookie_value(c.req.header("cookie"), kSessionCookie));
    Response res{204, {}, {}};
    res.headers.emplace_back("Set-Cookie", clear_session_cookie(options_.secure_cookies));
    c.reply(std::move(res));
  });
}

void RestApi::key_routes(Router& r) {
  auto need_store = [this](Call& c) {
    if (options_.keys) return true;
    c.reply(problem(503, "unavailable", "this server has no key database"));
    return false;
  };
  RouteMeta list;
  list.summary = "List API keys (never the keys themselves)";
  list.blocking = true;  // SQLite: off the I/O threads
  list.tags = {"keys"};
  list.auth = RouteAuth::kAdmin;
  list.response_schema = json{{"type", "object"}, {"properties", {{"keys", {{"type", "array"}}}}}};
  (void)r.add("GET", "/api/v1/keys", list, [this, need_store](Call& c) {
    if (!need_store(c)) return;
    auto keys = options_.keys->list();
    if (!keys.ok()) return c.reply(problem(keys.error()));
    json arr = json::array();
    for (const auto& k : *keys) arr.push_back(key_json(k));
    reply_json(c, 200, json{{"keys", arr}});
  });

  RouteMeta create;
  create.summary = "Create an API key (the secret is in this answer only)";
  create.blocking = true;  // SQLite: off the I/O threads
  create.tags = {"keys"};
  create.auth = RouteAuth::kAdmin;
  create.success_status = 201;
  create.request_schema =
      json{{"type", "object"},
           {"properties",
            {{"name", {{"type", "string"}, {"maxLength", 64}}}, {"admin", {{"type", "boolean"}}}}}};
  create.response_schema = json{{"type", "object"},
                                {"properties",
                                 {{"id", {{"type", "string"}}},
                                  {"name", {{"type", "string"}}},
                                  {"admin", {{"type", "boolean"}}},
                                  {"key", {{"type", "string"}}}}}};
  (void)r.add("POST", "/api/v1/keys", create, [this, need_store](Call& c) {
    if (!need_store(c)) return;
    auto body = json_body(c, 4096);
    if (!body) return;
    std::string name;
    bool admin = false;
    if (auto n = body->find("name"); n != body->end() && !n->is_null()) {
      if (!n->is_string() || n->get_ref<const std::string&>().size() > 64)
        return c.reply(
            problem(400, "invalid_argument", "name must be a string of at most 64 characters"));
      name = n->get<std::string>();
      for (unsigned char ch : name)
        if (ch < 0x20 || ch == 0x7f)
          return c.reply(
              problem(400, "invalid_argument", "name must not contain control characters"));
    }
    if (auto a = body->find("admin"); a != body->end() && !a->is_null()) {
      if (!a->is_boolean())
        return c.reply(problem(400, "invalid_argument", "admin must be a boolean"));
      admin = a->get<bool>();
    }
    auto k = options_.keys->create(name, admin);
    if (!k.ok()) return c.reply(problem(k.error()));
    reply_json(c, 201,
               json{{"id", k->info.id},
                    {"name", k->info.name},
                    {"admin", k->info.admin},
                    {"key", k->secret}});
  });

  RouteMeta del;
  del.summary = "Revoke an API key (its browser sessions end with it)";
  del.blocking = true;  // SQLite: off the I/O threads
  del.tags = {"keys"};
  del.auth = RouteAuth::kAdmin;
  del.success_status = 204;
  del.params = {RouteParam{"key_id", "path", "string", "the key's id", true}};
  (void)r.add("DELETE", "/api/v1/keys/{key_id}", del, [this, need_store](Call& c) {
    if (!need_store(c)) return;
    const std::string& id = c.param("key_id");
    // By id only: revoking by name too would let a key's name shadow another's id.
    if (auto s = options_.keys->revoke_id(id); !s.ok()) return c.reply(problem(s.error()));
    sessions_.remove_key(id);
    c.reply(Response{204, {}, {}});
  });
}

}  // namespace sandcastle::web
