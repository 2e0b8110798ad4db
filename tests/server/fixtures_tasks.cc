// Conformance fixtures for tasks (SEP-2663 scenarios tasks-*): a sync tool,
// task-supporting ones that sleep, fail, break, or wait for the client's
// input, and one that gathers input before it becomes a task.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "mcp/input_required.h"
#include "server/fixtures.h"

namespace sandcastle::mcp {

namespace {

json object_schema(json props, json required = json::array()) {
  return json{
      {"type", "object"}, {"properties", std::move(props)}, {"required", std::move(required)}};
}

json elicit(const std::string& message, const char* field, const char* type) {
  return json{{"method", "elicitation/create"},
              {"params",
               {{"message", message},
                {"requestedSchema",
                 object_schema(json{{field, {{"type", type}}}}, json::array({field}))}}}};
}

const json* task_answer(const RequestContext& ctx, const char* key) {
  const json& r = ctx.input_responses();
  if (!r.is_object()) return nullptr;
  auto it = r.find(key);
  return it == r.end() ? nullptr : &*it;
}

std::string content_field(const json* a, const char* name) {
  if (!a || !a->is_object()) return "?";
  const json c = a->value("content", json::object());
  if (!c.is_object() || !c.contains(name)) return "?";
  return c[name].is_string() ? c[name].get<std::string>() : c[name].dump();
}

// Each missing key in `requests` asked for at once; returns when all are answered.
void require(const RequestContext& ctx, const json& requests) {
  InputRequired more;
  for (const auto& [key, req] : requests.items())
    if (!task_answer(ctx, key.c_str())) more.input_requests[key] = req;
  if (!more.input_requests.empty()) throw std::move(more);
}

// Waits `ms` or until the work is cancelled; false when cancelled.
bool sleep_unless_cancelled(RequestContext& ctx, std::chrono::milliseconds ms) {
  std::mutex mu;
  std::condition_variable cv;
  bool woke = false;
  size_t sub = 0;
  if (ctx.cancel_token())
    sub = ctx.cancel_token()->on_cancel([&] {
      std::lock_guard lock(mu);
      woke = true;
      cv.notify_all();
    });
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, ms, [&] { return woke; });
  }
  if (ctx.cancel_token() && sub) ctx.cancel_token()->unsubscribe(sub);
  return !ctx.cancelled();
}

ToolDefinition def(const char* name, const char* description, json schema, TaskSupport support) {
  ToolDefinition d{name, "", description, std::move(schema), nullptr, nullptr, nullptr};
  d.task_support = support;
  return d;
}

}  // namespace

void register_task_fixtures(Server& server) {
  ToolRegistry& t = server.tools();
  t.add(def("greet", "Says hello at once (sync only; tasks fixture).",
            object_schema(json{{"name", {{"type", "string"}}}}, json::array({"name"})),
            TaskSupport::kForbidden),
        [](const json& args, RequestContext&) {
          return ToolResult::text("Hello, " + args["name"].get<std::string>() + "!");
        });
  t.add(def("slow_compute",
            "Sleeps `seconds` then answers, with progress each second; stops at cancellation "
            "(tasks fixture).",
            object_schema(json{{"seconds", {{"type", "number"}, {"minimum", 0}, {"maximum", 3600}}},
                               {"label", {{"type", "string"}}}},
                          json::array({"seconds"})),
            TaskSupport::kOptional),
        [](const json& args, RequestContext& ctx) {
          const double secs = args["seconds"].get<double>();
          const std::string label = args.value("label", std::string("compute"));
          int whole = static_cast<int>(secs);
          for (int i = 0; i < whole; ++i) {
            if (!sleep_unless_cancelled(ctx, std::chrono::seconds(1)))
              return ToolResult::error(label + ": cancelled after " + std::to_string(i) + " s");
            ctx.progress(i + 1, secs, label + ": " + std::to_string(i + 1) + " s");
            ctx.log("info", label + ": " + std::to_string(i + 1) + " s done");
          }
          auto rest = std::chrono::milliseconds(static_cast<int64_t>((secs - whole) * 1000));
          if (rest.count() > 0 && !sleep_unless_cancelled(ctx, rest))
            return ToolResult::error(label + ": cancelled");
          return ToolResult::text(label + ": computed after " + std::to_string(secs) + " s");
        });
  t.add(def("failing_job",
            "Fails as a tool (isError) after a moment; runs only as a task (tasks fixture).",
            object_schema(json::object()), TaskSupport::kRequired),
        [](const json&, RequestContext& ctx) {
          sleep_unless_cancelled(ctx, std::chrono::milliseconds(300));
          return ToolResult::error("failing_job always fails");
        });
  t.add(def("protocol_error_job", "Fails with a protocol error (tasks fixture).",
            object_schema(json::object()), TaskSupport::kOptional),
        [](const json&, RequestContext&) -> ToolResult {
          throw RpcError{rpc_error::kInternalError, "protocol_error_job always breaks", nullptr};
        });
  t.add(def("confirm_delete", "Asks the client to confirm, then answers (tasks fixture).",
            object_schema(json{{"filename", {{"type", "string"}}}}), TaskSupport::kOptional),
        [](const json& args, RequestContext& ctx) {
          const std::string file = args.value("filename", std::string("file"));
          require(ctx, json{{"confirm", elicit("Delete " + file + "?", "confirm", "boolean")}});
          const json* a = task_answer(ctx, "confirm");
          bool yes = a->value("action", std::string()) == "accept";
          return ToolResult::text(yes ? "Deleted " + file : "Kept " + file);
        });
  t.add(def("multi_input", "Asks two questions at once, then answers (tasks fixture).",
            object_schema(json::object()), TaskSupport::kOptional),
        [](const json&, RequestContext& ctx) {
          require(ctx, json{{"first", elicit("First name?", "name", "string")},
                            {"second", elicit("Second name?", "name", "string")}});
          return ToolResult::text("Got " + content_field(task_answer(ctx, "first"), "name") +
                                  " and " + content_field(task_answer(ctx, "second"), "name"));
        });
  ToolDefinition gather =
      def("test_tool_with_task",
          "Asks for a name in multi-round-trip rounds, then greets as a task (tasks fixture).",
          object_schema(json::object()), TaskSupport::kRequired);
  gather.before_task = [](const json&, RequestContext& ctx) {
    require(ctx, json{{"user_name", elicit("What is your name?", "name", "string")}});
  };
  t.add(std::move(gather), [](const json&, RequestContext& ctx) {
    sleep_unless_cancelled(ctx, std::chrono::milliseconds(100));
    return ToolResult::text("Hello, " + content_field(task_answer(ctx, "user_name"), "name") +
                            ", from a task");
  });
}

}  // namespace sandcastle::mcp
