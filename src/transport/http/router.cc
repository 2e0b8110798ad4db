#include "transport/http/router.h"

#include <algorithm>
#include <exception>

#include "common/thread_pool.h"
#include "transport/http/problem.h"

namespace sandcastle::transport::http {

namespace {

const std::string kNoParam;

struct Piece {
  enum Kind { kLiteral, kSegment, kRest } kind;
  std::string text;  // literal text or parameter name
};

// Splits a template into pieces; nullopt when malformed.
std::optional<std::vector<Piece>> parse(const std::string& tmpl) {
  std::vector<Piece> out;
  size_t i = 0;
  while (i < tmpl.size()) {
    if (tmpl[i] == '}') return std::nullopt;
    if (tmpl[i] != '{') {
      size_t j = tmpl.find_first_of("{}", i);
      if (j == std::string::npos) j = tmpl.size();
      out.push_back({Piece::kLiteral, tmpl.substr(i, j - i)});
      i = j;
      continue;
    }
    size_t close = tmpl.find('}', i);
    if (close == std::string::npos) return std::nullopt;
    std::string name = tmpl.substr(i + 1, close - i - 1);
    bool rest = !name.empty() && name.back() == '*';
    if (rest) name.pop_back();
    if (name.empty() || name.find_first_of("{/") != std::string::npos) return std::nullopt;
    // Two parameters side by side could split a segment either way.
    if (!out.empty() && out.back().kind != Piece::kLiteral) return std::nullopt;
    out.push_back({rest ? Piece::kRest : Piece::kSegment, name});
    i = close + 1;
    if (rest && i != tmpl.size()) return std::nullopt;
  }
  return out;
}

bool has_params(const std::string& tmpl) {
  return tmpl.find('{') != std::string::npos;
}

}  // namespace

const std::string& Call::param(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? kNoParam : it->second;
}

bool valid_template(const std::string& tmpl) {
  return !tmpl.empty() && tmpl[0] == '/' && parse(tmpl).has_value();
}

std::vector<std::string> template_params(const std::string& tmpl) {
  std::vector<std::string> names;
  if (auto pieces = parse(tmpl))
    for (const auto& p : *pieces)
      if (p.kind != Piece::kLiteral) names.push_back(p.text);
  return names;
}

bool match_template(const std::string& tmpl, const std::string& path, PathParams* params) {
  auto pieces = parse(tmpl);
  if (!pieces) return false;
  PathParams found;
  size_t pos = 0;
  for (const auto& p : *pieces) {
    switch (p.kind) {
      case Piece::kLiteral:
        if (path.compare(pos, p.text.size(), p.text) != 0) return false;
        pos += p.text.size();
        break;
      case Piece::kSegment: {
        size_t end = path.find('/', pos);
        if (end == std::string::npos) end = path.size();
        if (end == pos) return false;
        found[p.text] = path.substr(pos, end - pos);
        pos = end;
        break;
      }
      case Piece::kRest:
        found[p.text] = path.substr(pos);
        pos = path.size();
        break;
    }
  }
  if (pos != path.size()) return false;
  if (params) *params = std::move(found);
  return true;
}

Status Router::add(std::string method, std::string path, RouteMeta meta, RouteHandler handler) {
  if (!valid_template(path))
    return Error::make(ErrorCode::kInvalidArgument, "bad route template: " + path);
  for (const auto& r : routes_)
    if (r->method == method && r->path == path)
      return Error::make(ErrorCode::kInvalidArgument, "duplicate route: " + method + " " + path);
  // Path parameters the metadata does not describe are still documented.
  for (const auto& name : template_params(path)) {
    bool listed = std::any_of(meta.params.begin(), meta.params.end(), [&](const RouteParam& p) {
      return p.name == name && p.in == "path";
    });
    if (!listed)
      meta.params.insert(meta.params.begin(), RouteParam{name, "path", "string", "", true});
  }
  routes_.push_back(std::make_shared<Route>(
      Route{std::move(method), std::move(path), std::move(meta), std::move(handler)}));
  return ok_status();
}

RouteMatch Router::match(const std::string& method, const std::string& path) const {
  RouteMatch m;
  std::shared_ptr<const Route> best;
  PathParams best_params;
  // Two passes: literal templates first, so /sandboxes/events is not {id}.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& r : routes_) {
      if (has_params(r->path) != (pass == 1)) continue;
      PathParams params;
      if (!match_template(r->path, path, &params)) continue;
      if (std::find(m.allowed.begin(), m.allowed.end(), r->method) == m.allowed.end())
        m.allowed.push_back(r->method);
      if (!best && (r->method == method || r->method == "*")) {
        best = r;
        best_params = std::move(params);
      }
    }
    if (best) break;
    // A path a literal route owns is not also a parameterised one's.
    if (!m.allowed.empty()) break;
  }
  m.route = best;
  m.params = std::move(best_params);
  return m;
}

void Router::set_guard(RouteAuth auth, RouteGuard guard) {
  guards_[auth] = std::move(guard);
}

namespace {

void run_route(const Route& route, const RouteGuard* guard, Call& call) {
  try {
    if (guard && *guard && !(*guard)(call, route)) return;
    route.handler(call);
  } catch (const std::exception& e) {
    call.reply(problem(500, "internal", std::string("internal error: ") + e.what()));
  }
}

}  // namespace

void Router::dispatch(std::shared_ptr<const Route> route, Call& call) const {
  auto g = guards_.find(route->meta.auth);
  const RouteGuard* guard = g == guards_.end() ? nullptr : &g->second;
  // A guard reads the key database: guarded routes never run on an I/O thread.
  if (!route->meta.blocking && !(guard && *guard)) return run_route(*route, guard, call);
  // The request is the handler's until it returns: the task takes it over.
  // The task keeps the route and a copy of its guard (not this router).
  auto req = std::make_shared<Request>(std::move(call.req));
  ElasticPool::shared().submit([route = std::move(route), guard = guard ? *guard : RouteGuard(),
                                req, ex = call.ex, params = std::move(call.params),
                                cors = std::move(call.cors), key_id = call.key_id]() mutable {
    Call c{*req, std::move(ex), std::move(params), std::move(cors), std::move(key_id)};
    run_route(*route, &guard, c);
  });
}

std::string allow_header(const std::vector<std::string>& methods) {
  std::string out;
  for (const auto& m : methods) {
    if (m == "*") continue;
    if (!out.empty()) out += ", ";
    out += m;
  }
  return out;
}

}  // namespace sandcastle::transport::http
