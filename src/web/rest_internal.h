// Shared by the REST handlers (rest_*.cc).
#pragma once

#include <optional>
#include <string>

#include "service/sandboxes.h"
#include "transport/http/problem.h"
#include "web/rest_api.h"

namespace sandcastle::web::rest {

using nlohmann::json;
using transport::http::problem;
using transport::http::Response;
using transport::http::RouteMeta;
using transport::http::RouteParam;

inline service::Caller to_service(const Caller& c) {
  return service::Caller{c.owner(), c.key_id};
}

// The result as JSON with `status`, or its error as a problem.
inline void reply_result(Call& c, const Result<json>& r, int status = 200) {
  if (!r.ok()) return c.reply(problem(r.error()));
  reply_json(c, status, *r);
}

inline RouteMeta meta(std::string summary, std::string tag, RouteAuth auth = RouteAuth::kApi) {
  RouteMeta m;
  m.summary = std::move(summary);
  m.tags = {std::move(tag)};
  m.auth = auth;
  m.blocking = true;  // the guard reads SQLite; service calls block
  m.response_schema = json{{"type", "object"}};
  return m;
}

inline const json& kObject() {
  static const json o{{"type", "object"}};
  return o;
}

// An unsigned query parameter: nullopt when absent; false when not a number
// in [0, max] (after answering 400).
inline bool query_uint(Call& c, const std::string& name, uint64_t max,
                       std::optional<uint64_t>* out) {
  auto it = c.req.query.find(name);
  if (it == c.req.query.end() || it->second.empty()) return true;
  const std::string& v = it->second;
  uint64_t n = 0;
  bool ok = v.size() <= 19;
  for (char ch : v) {
    if (ch < '0' || ch > '9') ok = false;
    if (ok) n = n * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (!ok || n > max) {
    c.reply(problem(400, "invalid_argument",
                    name + " must be an integer from 0 to " + std::to_string(max)));
    return false;
  }
  *out = n;
  return true;
}

inline bool query_flag(const Call& c, const std::string& name) {
  auto it = c.req.query.find(name);
  return it != c.req.query.end() && (it->second == "1" || it->second == "true");
}

inline std::string sse_event(const std::string& event, const json& data) {
  return "event: " + event +
         "\ndata: " + data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

inline transport::http::Headers sse_headers() {
  return {{"Content-Type", "text/event-stream"},
          {"Cache-Control", "no-cache, no-transform"},
          {"X-Accel-Buffering", "no"}};
}

}  // namespace sandcastle::web::rest
