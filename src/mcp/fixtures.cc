#include "mcp/fixtures.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sandcastle::mcp {

namespace {

// A 1x1 red PNG and a 16-sample silent WAV: the smallest valid media.
constexpr const char* kPng =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
constexpr const char* kWav = "UklGRjQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YRAAAACAgICAgICAgICAgICAgICA";

json no_args() {
  return json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}};
}

json read_only() { return json{{"readOnlyHint", true}, {"openWorldHint", false}}; }

// Sleeps `ms`, waking early when the request is cancelled. Returns false if cancelled.
bool interruptible_sleep(RequestContext& ctx, std::chrono::milliseconds ms) {
  std::mutex mu;
  std::condition_variable cv;
  bool woke = false;
  size_t sub = 0;
  if (ctx.cancel_token()) {
    sub = ctx.cancel_token()->on_cancel([&] {
      std::lock_guard lock(mu);
      woke = true;
      cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, ms, [&] { return woke; });
  }
  if (ctx.cancel_token() && sub) ctx.cancel_token()->unsubscribe(sub);
  return !ctx.cancelled();
}

ToolResult content_result(json content) {
  ToolResult r;
  r.content = std::move(content);
  return r;
}

}  // namespace

void register_test_fixtures(Server& server) {
  ToolRegistry& t = server.tools();
  t.add({"test_simple_text", "Simple text", "Returns a fixed text (conformance fixture).", no_args(),
         nullptr, read_only(), nullptr},
        [](const json&, RequestContext&) {
          return ToolResult::text("This is a simple text response for testing.");
        });
  t.add({"test_image_content", "Image content", "Returns a 1x1 PNG image (conformance fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext&) {
          return content_result(json::array({{{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}}}));
        });
  t.add({"test_audio_content", "Audio content", "Returns a tiny WAV clip (conformance fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext&) {
          return content_result(json::array({{{"type", "audio"}, {"data", kWav}, {"mimeType", "audio/wav"}}}));
        });
  t.add({"test_embedded_resource", "Embedded resource",
         "Returns an embedded text resource (conformance fixture).", no_args(), nullptr,
         read_only(), nullptr},
        [](const json&, RequestContext&) {
          return content_result(json::array(
              {{{"type", "resource"},
                {"resource", {{"uri", "test://embedded-resource"},
                              {"mimeType", "text/plain"},
                              {"text", "This is an embedded resource content."}}}}}));
        });
  t.add({"test_multiple_content_types", "Multiple content types",
         "Returns text, image and resource content (conformance fixture).", no_args(), nullptr,
         read_only(), nullptr},
        [](const json&, RequestContext&) {
          return content_result(json::array(
              {{{"type", "text"}, {"text", "Multiple content types test:"}},
               {{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}},
               {{"type", "resource"},
                {"resource", {{"uri", "test://mixed-content-resource"},
                              {"mimeType", "application/json"},
                              {"text", R"({"test":"data","value":123})"}}}}}));
        });
  t.add({"test_tool_with_logging", "Logging", "Sends three log messages 50 ms apart (conformance fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext& ctx) {
          ctx.log("info", "Tool execution started");
          interruptible_sleep(ctx, std::chrono::milliseconds(50));
          ctx.log("info", "Tool processing data");
          interruptible_sleep(ctx, std::chrono::milliseconds(50));
          ctx.log("info", "Tool execution completed");
          return ToolResult::text("Tool with logging executed successfully");
        });
  t.add({"test_tool_with_progress", "Progress",
         "Reports progress 0, 50 and 100 of 100, 50 ms apart (conformance fixture).", no_args(),
         nullptr, read_only(), nullptr},
        [](const json&, RequestContext& ctx) {
          ctx.progress(0, 100, "started");
          interruptible_sleep(ctx, std::chrono::milliseconds(50));
          ctx.progress(50, 100, "halfway");
          interruptible_sleep(ctx, std::chrono::milliseconds(50));
          ctx.progress(100, 100, "done");
          return ToolResult::text("Tool with progress executed successfully");
        });
  t.add({"test_error_handling", "Error", "Always fails with isError (conformance fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext&) {
          return ToolResult::error("This tool intentionally returns an error for testing");
        });
  t.add({"json_schema_2020_12_tool", "JSON Schema 2020-12",
         "Has an input schema using 2020-12 keywords (conformance fixture).",
         json{{"$schema", "https://json-schema.org/draft/2020-12/schema"},
              {"type", "object"},
              {"$defs", {{"address", {{"type", "object"},
                                      {"properties", {{"street", {{"type", "string"}}},
                                                      {"city", {{"type", "string"}}}}}}}}},
              {"properties", {{"name", {{"type", "string"}}},
                              {"address", {{"$ref", "#/$defs/address"}}}}},
              {"additionalProperties", false}},
         nullptr, read_only(), nullptr},
        [](const json& args, RequestContext&) { return ToolResult::text("received: " + args.dump()); });
  // Our own fixtures: a slow call (concurrency, cancellation) and one with
  // typed, validated arguments and structured output.
  t.add({"test_sleep", "Sleep",
         "Sleeps for ms milliseconds, reporting progress every 100 ms; stops early when cancelled.",
         json{{"type", "object"},
              {"properties", {{"ms", {{"type", "integer"}, {"minimum", 0}, {"maximum", 600000}}}}},
              {"required", {"ms"}},
              {"additionalProperties", false}},
         json{{"type", "object"},
              {"properties", {{"slept_ms", {{"type", "integer"}}}}},
              {"required", {"slept_ms"}}},
         read_only(), nullptr},
        [](const json& args, RequestContext& ctx) {
          const auto total = args["ms"].get<int64_t>();
          auto start = std::chrono::steady_clock::now();
          int64_t done = 0;
          while (done < total) {
            int64_t step = std::min<int64_t>(100, total - done);
            if (!interruptible_sleep(ctx, std::chrono::milliseconds(step))) break;
            done += step;
            ctx.progress(static_cast<double>(done), static_cast<double>(total));
          }
          auto slept = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start).count();
          return ToolResult::from_structured(json{{"slept_ms", slept}});
        });
  t.add({"test_echo", "Echo", "Echoes typed arguments back as structured content.",
         json{{"type", "object"},
              {"properties", {{"text", {{"type", "string"}, {"maxLength", 1000}}},
                              {"count", {{"type", "integer"}, {"minimum", 1}, {"default", 1}}},
                              {"mode", {{"type", "string"}, {"enum", {"plain", "upper"}}, {"default", "plain"}}}}},
              {"required", {"text"}},
              {"additionalProperties", false}},
         json{{"type", "object"},
              {"properties", {{"text", {{"type", "string"}}}, {"count", {{"type", "integer"}}}}},
              {"required", {"text", "count"}}},
         read_only(), nullptr},
        [](const json& args, RequestContext&) {
          std::string text = args["text"];
          if (args["mode"] == "upper")
            for (auto& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
          return ToolResult::from_structured(json{{"text", text}, {"count", args["count"]}});
        });
  t.add({"test_needs_sampling", "Needs sampling",
         "Requires the client's sampling capability (modern era: -32021 without it).", no_args(),
         nullptr, read_only(), json{{"sampling", json::object()}}},
        [](const json&, RequestContext&) { return ToolResult::text("client declared sampling"); });
}

}  // namespace sandcastle::mcp
