// /api/v1: health, metrics, images, sandboxes (list, create, get, delete,
// pause/resume/fork/save), interrupt, restart, history, packages.
#include <sstream>

#include "common/metrics.h"
#include "web/rest_internal.h"

namespace sandcastle::web {

using namespace rest;

namespace {

// The Prometheus text of /metrics as JSON: {name: [{labels, value}]}.
json metrics_json(const std::string& text) {
  json out = json::object();
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    std::string series = line.substr(0, sp);
    double value = 0;
    try {
      value = std::stod(line.substr(sp + 1));
    } catch (const std::exception&) {
      continue;
    }
    std::string name = series;
    json labels = json::object();
    if (auto brace = series.find('{'); brace != std::string::npos && series.back() == '}') {
      name = series.substr(0, brace);
      std::string body = series.substr(brace + 1, series.size() - brace - 2);
      size_t pos = 0;
      while (pos < body.size()) {
        auto eq = body.find("=\"", pos);
        if (eq == std::string::npos) break;
        std::string key = body.substr(pos, eq - pos);
        std::string val;
        size_t i = eq + 2;
        for (; i < body.size() && body[i] != '"'; ++i) {
          if (body[i] == '\\' && i + 1 < body.size()) ++i;
          val.push_back(body[i]);
        }
        labels[key] = val;
        pos = body.find(',', i);
        if (pos == std::string::npos) break;
        ++pos;
      }
    }
    out[name].push_back(json{{"labels", labels}, {"value", value}});
  }
  return out;
}

}  // namespace

void RestApi::sandbox_routes(Router& r) {
  service::Sandboxes* svc = options_.sandboxes;  // outlives the server; null: 503
  {
    auto m = meta("Server health (no key needed)", "server", RouteAuth::kNone);
    (void)r.add("GET", "/api/v1/health", m, [this, svc](Call& c) {
      json out{{"status", "ok"},
               {"version", options_.version},
               {"uptime_s", std::chrono::duration_cast<std::chrono::seconds>(
                                std::chrono::steady_clock::now() - started_)
                                .count()},
               {"backend", options_.backend}};
      if (svc) {
        out["sandboxes"] = svc->live_count();
        out["warm_ready"] = svc->warm_ready();
      }
      reply_json(c, 200, out);
    });
  }
  {
    auto m = meta("The server's metrics as JSON (the numbers of /metrics)", "server");
    (void)r.add("GET", "/api/v1/metrics", m, [](Call& c) {
      reply_json(c, 200, json{{"metrics", metrics_json(metrics::registry().render())}});
    });
  }
  {
    auto m = meta("Images sandboxes can start from (list_images)", "images");
    (void)r.add("GET", "/api/v1/images", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        reply_result(call, svc->images(to_service(who)));
      });
    });
  }
  {
    auto m = meta("The caller's sandboxes", "sandboxes");
    (void)r.add("GET", "/api/v1/sandboxes", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        reply_json(call, 200, json{{"sandboxes", svc->list(to_service(who))}});
      });
    });
  }
  {
    auto m = meta("Create a sandbox (create_sandbox's arguments)", "sandboxes");
    m.request_schema = kObject();
    m.success_status = 201;
    (void)r.add("POST", "/api/v1/sandboxes", m, [this, svc](Call& c) {
      with_service(c, [svc, max = options_.max_json_bytes](Call& call, const Caller& who) {
        auto body = json_body(call, max);
        if (!body) return;
        reply_result(call, svc->create(to_service(who), *body), 201);
      });
    });
  }
  {
    auto m = meta("One sandbox, with its resource usage", "sandboxes");
    (void)r.add("GET", "/api/v1/sandboxes/{id}", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        reply_result(call, svc->get(to_service(who), call.param("id")));
      });
    });
  }
  {
    auto m = meta("Close a sandbox", "sandboxes");
    m.success_status = 204;
    (void)r.add("DELETE", "/api/v1/sandboxes/{id}", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        auto res = svc->close(to_service(who), call.param("id"));
        if (!res.ok()) return call.reply(problem(res.error()));
        call.reply(Response{204, {}, {}});
      });
    });
  }
  using Op =
      Result<json> (service::Sandboxes::*)(const service::Caller&, const std::string&, const json&);
  struct Action {
    const char* path;
    const char* summary;
    Op op;
  };
  for (const Action& a :
       {Action{"/api/v1/sandboxes/{id}/pause", "Pause a sandbox (pause_sandbox)",
               &service::Sandboxes::pause},
        Action{"/api/v1/sandboxes/{id}/resume", "Resume a sandbox (resume_sandbox)",
               &service::Sandboxes::resume},
        Action{"/api/v1/sandboxes/{id}/fork", "Fork a sandbox (fork_sandbox)",
               &service::Sandboxes::fork},
        Action{"/api/v1/sandboxes/{id}/save", "Save a sandbox as an image (save_sandbox)",
               &service::Sandboxes::save},
        Action{"/api/v1/sandboxes/{id}/network",
               "Replace a networked sandbox's allow/deny rules (set_sandbox_network)",
               &service::Sandboxes::set_network}}) {
    auto m = meta(a.summary, "sandboxes");
    m.request_schema = kObject();
    Op op = a.op;
    (void)r.add("POST", a.path, m, [this, svc, op](Call& c) {
      with_service(c, [svc, op, max = options_.max_json_bytes](Call& call, const Caller& who) {
        auto body = json_body(call, max);
        if (!body) return;
        reply_result(call, (svc->*op)(to_service(who), call.param("id"), *body));
      });
    });
  }
  {
    auto m = meta("Interrupt the running execution (KeyboardInterrupt in kernels)", "executions");
    m.success_status = 202;
    (void)r.add("POST", "/api/v1/sandboxes/{id}/interrupt", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        auto res = svc->interrupt(to_service(who), call.param("id"));
        if (!res.ok()) return call.reply(problem(res.error()));
        reply_json(call, 202, json{{"interrupted", *res}});
      });
    });
  }
  {
    auto m = meta("Restart the sandbox's kernel (restart_kernel)", "executions");
    (void)r.add("POST", "/api/v1/sandboxes/{id}/restart", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        reply_result(call, svc->restart_kernel(to_service(who), call.param("id")));
      });
    });
  }
  {
    auto m = meta("Run history (get_sandbox_history), newest first", "executions");
    m.params = {RouteParam{"cursor", "query", "integer", "the previous page's next_before", false},
                RouteParam{"limit", "query", "integer", "entries per page", false}};
    (void)r.add("GET", "/api/v1/sandboxes/{id}/history", m, [this, svc](Call& c) {
      std::optional<uint64_t> cursor, limit;
      if (!query_uint(c, "cursor", uint64_t{1} << 62, &cursor) ||
          !query_uint(c, "limit", 1000, &limit))
        return;
      with_service(c, [svc, cursor, limit](Call& call, const Caller& who) {
        reply_result(call, svc->history(to_service(who), call.param("id"),
                                        static_cast<int64_t>(cursor.value_or(0)),
                                        static_cast<size_t>(limit.value_or(0))));
      });
    });
  }
  {
    auto m = meta("Packages installed or installing", "packages");
    (void)r.add("GET", "/api/v1/sandboxes/{id}/packages", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        reply_result(call, svc->packages(to_service(who), call.param("id")));
      });
    });
  }
  {
    auto m = meta("Install packages (install_packages' arguments)", "packages");
    m.request_schema = kObject();
    m.success_status = 202;
    (void)r.add("POST", "/api/v1/sandboxes/{id}/packages", m, [this, svc](Call& c) {
      with_service(c, [svc, max = options_.max_json_bytes](Call& call, const Caller& who) {
        auto body = json_body(call, max);
        if (!body) return;
        reply_result(call, svc->install_packages(to_service(who), call.param("id"), *body), 202);
      });
    });
  }
}

}  // namespace sandcastle::web
