// POST /api/v1/sandboxes/{id}/executions: run code or a command; the
// structured result as JSON, or with Accept: text/event-stream the output as
// it comes (stdout, stderr), the displays, then the result. Closing the
// stream cancels the run.
#include "web/rest_internal.h"

namespace sandcastle::web {

using namespace rest;

void RestApi::exec_routes(Router& r) {
  service::Sandboxes* svc = options_.sandboxes;  // outlives the server; null: 503
  auto m = meta(
      "Run code or a command (execute_code / execute_command); SSE with Accept: text/event-stream",
      "executions");
  m.request_schema =
      json{{"type", "object"},
           {"properties",
            {{"kind", {{"type", "string"}, {"enum", json::array({"code", "command"})}}},
             {"code", {{"type", "string"}}},
             {"command", {{"type", "string"}}},
             {"language", {{"type", "string"}}},
             {"timeout_s", {{"type", "number"}}},
             {"stdin", {{"type", "string"}}}}}};
  (void)r.add("POST", "/api/v1/sandboxes/{id}/executions", m, [this, svc](Call& c) {
    with_service(c, [svc, max = options_.max_json_bytes](Call& call, const Caller& who) {
      auto body = json_body(call, max);
      if (!body) return;
      std::string kind = "code";
      if (auto k = body->find("kind"); k != body->end()) {
        if (!k->is_string() || (*k != "code" && *k != "command"))
          return call.reply(
              problem(400, "invalid_argument", "kind must be \"code\" or \"command\""));
        kind = k->get<std::string>();
        body->erase("kind");
      }
      (*body)["sandbox_id"] = call.param("id");
      const auto caller = to_service(who);
      // A run that throws (a bug, never the sandbox's doing) is the server's
      // error: 500 "internal", on the stream as on a plain reply.
      auto run = [&](const service::RunOptions& opts) -> Result<json> {
        try {
          return kind == "code" ? svc->run_code(caller, *body, opts)
                                : svc->run_command(caller, *body, opts);
        } catch (const std::exception& e) {
          return Error::make(ErrorCode::kInternal, std::string("the run failed: ") + e.what());
        }
      };
      if (call.req.header("accept").find("text/event-stream") == std::string::npos) {
        // A client that goes away cancels its run, as closing a stream does.
        auto token = std::make_shared<service::CancelToken>();
        call.ex->on_close([token] { token->cancel(); });
        service::RunOptions opts;
        opts.cancel = token.get();
        return reply_result(call, run(opts));
      }
      // A sandbox that is not there is an HTTP error, not an event.
      if (auto g = svc->get(caller, call.param("id")); !g.ok())
        return call.reply(problem(g.error()));
      auto ex = call.ex;
      auto token = std::make_shared<service::CancelToken>();
      ex->on_close([token] { token->cancel(); });
      auto headers = sse_headers();
      for (auto& h : call.cors) headers.push_back(h);
      ex->start_stream(200, std::move(headers));
      service::RunOptions opts;
      opts.cancel = token.get();
      opts.callbacks.on_output = [ex](std::string_view stream, std::string_view text) {
        ex->write(
            sse_event(stream == "stderr" ? "stderr" : "stdout", json{{"text", std::string(text)}}));
      };
      auto res = run(opts);
      if (!res.ok()) {
        const auto& e = res.error();
        ex->write(sse_event("error", json{{"status", transport::http::status_for(e)},
                                          {"code", transport::http::problem_code(e)},
                                          {"detail", e.message()}}));
        return ex->finish();
      }
      if (auto d = res->find("displays"); d != res->end() && d->is_array())
        for (const auto& bundle : *d) ex->write(sse_event("display", json{{"bundle", bundle}}));
      ex->write(sse_event("result", *res));
      ex->finish();
    });
  });
}

}  // namespace sandcastle::web
