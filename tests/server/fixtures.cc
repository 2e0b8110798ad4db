#include "server/fixtures.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
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


// Server-to-client requests (legacy era): sampling and elicitation, plus a
// tool whose SSE stream the server closes mid-call (SSE polling, SEP-1699).
void register_client_request_fixtures(Server& server) {
  ToolRegistry& t = server.tools();
  auto needs = [](RequestContext& ctx, const char* cap) {
    return ctx.client_capabilities().is_object() && ctx.client_capabilities().contains(cap);
  };
  t.add({"test_sampling", "Sampling", "Asks the client's LLM to answer a prompt (conformance fixture).",
         json{{"type", "object"},
              {"properties", {{"prompt", {{"type", "string"}, {"description", "The prompt to send to the LLM"}}}}},
              {"required", {"prompt"}}},
         nullptr, read_only(), json{{"sampling", json::object()}}},
        [needs](const json& args, RequestContext& ctx) {
          if (!needs(ctx, "sampling"))
            return ToolResult::error("the client did not declare the sampling capability");
          json r = ctx.request("sampling/createMessage",
                               json{{"messages", json::array({{{"role", "user"},
                                                               {"content", {{"type", "text"}, {"text", args["prompt"]}}}}})},
                                    {"maxTokens", 100}});
          std::string text = r.contains("content") && r["content"].is_object()
                                 ? r["content"].value("text", r["content"].dump())
                                 : r.dump();
          return ToolResult::text("LLM response: " + text);
        });
  t.add({"test_elicitation", "Elicitation", "Asks the user for a username and email (conformance fixture).",
         json{{"type", "object"},
              {"properties", {{"message", {{"type", "string"}, {"description", "The message to show the user"}}}}},
              {"required", {"message"}}},
         nullptr, read_only(), json{{"elicitation", json::object()}}},
        [needs](const json& args, RequestContext& ctx) {
          if (!needs(ctx, "elicitation"))
            return ToolResult::error("the client did not declare the elicitation capability");
          json r = ctx.request(
              "elicitation/create",
              json{{"message", args["message"]},
                   {"requestedSchema",
                    {{"type", "object"},
                     {"properties", {{"username", {{"type", "string"}, {"description", "User's response"}}},
                                     {"email", {{"type", "string"}, {"description", "User's email address"}}}}},
                     {"required", {"username", "email"}}}}});
          return ToolResult::text("User response: action=" + r.value("action", std::string("?")) +
                                  ", content=" + r.value("content", json::object()).dump());
        });
  t.add({"test_elicitation_sep1034_defaults", "Elicitation defaults",
         "Elicits a form whose fields all have defaults (conformance fixture, SEP-1034).", no_args(), nullptr,
         read_only(), json{{"elicitation", json::object()}}},
        [needs](const json&, RequestContext& ctx) {
          if (!needs(ctx, "elicitation"))
            return ToolResult::error("the client did not declare the elicitation capability");
          json r = ctx.request(
              "elicitation/create",
              json{{"message", "Please review and update the form fields with defaults"},
                   {"requestedSchema",
                    {{"type", "object"},
                     {"properties",
                      {{"name", {{"type", "string"}, {"description", "User name"}, {"default", "John Doe"}}},
                       {"age", {{"type", "integer"}, {"description", "User age"}, {"default", 30}}},
                       {"score", {{"type", "number"}, {"description", "User score"}, {"default", 95.5}}},
                       {"status",
                        {{"type", "string"},
                         {"description", "User status"},
                         {"enum", {"active", "inactive", "pending"}},
                         {"default", "active"}}},
                       {"verified", {{"type", "boolean"}, {"description", "Verification status"}, {"default", true}}}}},
                     {"required", json::array()}}}});
          return ToolResult::text("Elicitation completed: action=" + r.value("action", std::string("?")) +
                                  ", content=" + r.value("content", json::object()).dump());
        });
  t.add({"test_elicitation_sep1330_enums", "Elicitation enums",
         "Elicits a form with every enum variant (conformance fixture, SEP-1330).", no_args(), nullptr, read_only(),
         json{{"elicitation", json::object()}}},
        [needs](const json&, RequestContext& ctx) {
          if (!needs(ctx, "elicitation"))
            return ToolResult::error("the client did not declare the elicitation capability");
          json props{
              {"untitledSingle", {{"type", "string"}, {"description", "Untitled single-select"},
                                  {"enum", {"option1", "option2", "option3"}}}},
              {"titledSingle",
               {{"type", "string"},
                {"description", "Titled single-select"},
                {"oneOf", json::array({{{"const", "value1"}, {"title", "First Option"}},
                                       {{"const", "value2"}, {"title", "Second Option"}},
                                       {{"const", "value3"}, {"title", "Third Option"}}})}}},
              {"legacyEnum",
               {{"type", "string"},
                {"description", "Legacy titled enum"},
                {"enum", {"opt1", "opt2", "opt3"}},
                {"enumNames", {"Option One", "Option Two", "Option Three"}}}},
              {"untitledMulti",
               {{"type", "array"},
                {"description", "Untitled multi-select"},
                {"items", {{"type", "string"}, {"enum", {"option1", "option2", "option3"}}}}}},
              {"titledMulti",
               {{"type", "array"},
                {"description", "Titled multi-select"},
                {"items", {{"anyOf", json::array({{{"const", "value1"}, {"title", "First Choice"}},
                                                  {{"const", "value2"}, {"title", "Second Choice"}},
                                                  {{"const", "value3"}, {"title", "Third Choice"}}})}}}}}};
          json r = ctx.request("elicitation/create",
                               json{{"message", "Please choose from every kind of enum"},
                                    {"requestedSchema", {{"type", "object"}, {"properties", props}, {"required", json::array()}}}});
          return ToolResult::text("Elicitation completed: action=" + r.value("action", std::string("?")) +
                                  ", content=" + r.value("content", json::object()).dump());
        });
  t.add({"test_reconnection", "Reconnection",
         "Closes its SSE stream mid-call; the result arrives after the client reconnects (SEP-1699 fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext& ctx) {
          interruptible_sleep(ctx, std::chrono::milliseconds(50));
          ctx.close_stream();
          interruptible_sleep(ctx, std::chrono::milliseconds(300));
          return ToolResult::text("Reconnection test completed successfully");
        });
}

// Wraps an existing method (the sandbox resources) so fixture URIs are
// served first and everything else falls through to it.
void wrap_method(Server& server, const std::string& name, MethodSpec defaults,
                 std::function<std::optional<json>(const json&, RequestContext&, const MethodSpec*)> fn) {
  const MethodSpec* prev = server.find_method(name);
  MethodSpec spec = prev ? *prev : std::move(defaults);
  auto inner = prev ? std::make_shared<MethodSpec>(*prev) : nullptr;
  spec.handler = [fn, inner](const json& params, RequestContext& ctx) -> json {
    if (auto r = fn(params, ctx, inner.get())) return *r;
    if (inner) return inner->handler(params, ctx);
    throw RpcError{rpc_error::kInvalidParams, "unknown resource", nullptr};
  };
  server.add_method(name, std::move(spec));
}

void register_resource_fixtures(Server& server) {
  static const json kStatic = json::array(
      {{{"uri", "test://static-text"}, {"name", "static-text"}, {"title", "Static text"},
        {"description", "A static text resource (conformance fixture)"}, {"mimeType", "text/plain"}},
       {{"uri", "test://static-binary"}, {"name", "static-binary"}, {"title", "Static binary"},
        {"description", "A static PNG resource (conformance fixture)"}, {"mimeType", "image/png"}},
       {{"uri", "test://watched-resource"}, {"name", "watched-resource"}, {"title", "Watched resource"},
        {"description", "A resource to subscribe to (conformance fixture)"}, {"mimeType", "text/plain"}}});
  MethodSpec cacheable;
  cacheable.cacheable = true;
  wrap_method(server, "resources/list", cacheable, [](const json& params, RequestContext& ctx, const MethodSpec* inner) {
    json r = inner ? inner->handler(params, ctx) : json{{"resources", json::array()}};
    json all = kStatic;
    for (auto& x : r["resources"]) all.push_back(x);
    r["resources"] = all;
    return std::optional<json>(r);
  });
  wrap_method(server, "resources/templates/list", cacheable,
              [](const json& params, RequestContext& ctx, const MethodSpec* inner) {
                json r = inner ? inner->handler(params, ctx) : json{{"resourceTemplates", json::array()}};
                r["resourceTemplates"].push_back({{"uriTemplate", "test://template/{id}/data"},
                                                  {"name", "template-data"},
                                                  {"title", "Template data"},
                                                  {"description", "Data for an id (conformance fixture)"},
                                                  {"mimeType", "application/json"}});
                return std::optional<json>(r);
              });
  MethodSpec read_defaults;
  read_defaults.cacheable = true;
  wrap_method(server, "resources/read", read_defaults,
              [](const json& params, RequestContext& ctx, const MethodSpec*) -> std::optional<json> {
                std::string uri = params.value("uri", std::string());
                if (uri.rfind("test://", 0) != 0) return std::nullopt;
                auto one = [&](json c) { return json{{"contents", json::array({std::move(c)})}}; };
                if (uri == "test://static-text")
                  return one({{"uri", uri}, {"mimeType", "text/plain"},
                              {"text", "This is the content of the static text resource."}});
                if (uri == "test://static-binary")
                  return one({{"uri", uri}, {"mimeType", "image/png"}, {"blob", kPng}});
                if (uri == "test://watched-resource")
                  return one({{"uri", uri}, {"mimeType", "text/plain"}, {"text", "Watched resource content."}});
                const std::string prefix = "test://template/", suffix = "/data";
                if (uri.size() > prefix.size() + suffix.size() && uri.rfind(prefix, 0) == 0 &&
                    uri.compare(uri.size() - suffix.size(), suffix.size(), suffix) == 0) {
                  std::string id = uri.substr(prefix.size(), uri.size() - prefix.size() - suffix.size());
                  if (id.find('/') == std::string::npos)
                    return one({{"uri", uri}, {"mimeType", "application/json"},
                                {"text", json{{"id", id}, {"templateTest", true}, {"data", "Data for ID: " + id}}.dump()}});
                }
                int code = ctx.era() == Era::kModern ? rpc_error::kInvalidParams : rpc_error::kResourceNotFound;
                throw RpcError{code, "Resource not found: " + uri, json{{"uri", uri}}};
              });
  // Subscriptions (legacy era): tracked per server; updates are never sent
  // because fixture resources never change.
  auto subs = std::make_shared<std::pair<std::mutex, std::set<std::string>>>();
  MethodSpec sub;
  sub.legacy_only = true;
  sub.handler = [subs](const json& params, RequestContext&) {
    if (!params.contains("uri") || !params["uri"].is_string())
      throw RpcError{rpc_error::kInvalidParams, "resources/subscribe needs \"uri\"", nullptr};
    std::lock_guard lock(subs->first);
    subs->second.insert(params["uri"].get<std::string>());
    return json::object();
  };
  server.add_method("resources/subscribe", sub);
  MethodSpec unsub = sub;
  unsub.handler = [subs](const json& params, RequestContext&) {
    std::lock_guard lock(subs->first);
    subs->second.erase(params.value("uri", std::string()));
    return json::object();
  };
  server.add_method("resources/unsubscribe", unsub);
}

void register_prompt_fixtures(Server& server) {
  static const json kPrompts = json::array(
      {{{"name", "test_simple_prompt"}, {"title", "Simple prompt"},
        {"description", "A prompt without arguments (conformance fixture)"}},
       {{"name", "test_prompt_with_arguments"}, {"title", "Prompt with arguments"},
        {"description", "A prompt with two required arguments (conformance fixture)"},
        {"arguments", json::array({{{"name", "arg1"}, {"description", "First test argument"}, {"required", true}},
                                   {{"name", "arg2"}, {"description", "Second test argument"}, {"required", true}}})}},
       {{"name", "test_prompt_with_embedded_resource"}, {"title", "Prompt with a resource"},
        {"description", "A prompt embedding a resource (conformance fixture)"},
        {"arguments", json::array({{{"name", "resourceUri"}, {"description", "URI of the resource to embed"},
                                    {"required", true}}})}},
       {{"name", "test_prompt_with_image"}, {"title", "Prompt with an image"},
        {"description", "A prompt with an image (conformance fixture)"}},
       {{"name", "test_input_required_result_prompt"}, {"title", "Prompt needing input"},
        {"description", "Asks the client for context through InputRequired (conformance fixture, 2026-07-28)"}}});
  MethodSpec list;
  list.cacheable = true;
  list.ttl_ms = 60'000;
  list.cache_public = true;
  list.handler = [](const json&, RequestContext&) { return json{{"prompts", kPrompts}}; };
  server.add_method("prompts/list", list);
  MethodSpec get;
  get.handler = [](const json& params, RequestContext& ctx) {
    std::string name = params.value("name", std::string());
    if (name == "test_input_required_result_prompt") return input_required_prompt(ctx);
    json args = params.value("arguments", json::object());
    auto arg = [&](const char* k) -> std::string {
      if (!args.is_object() || !args.contains(k) || !args[k].is_string())
        throw RpcError{rpc_error::kInvalidParams, "prompt " + name + " needs argument '" + k + "'", nullptr};
      return args[k].get<std::string>();
    };
    auto user = [](json content) { return json{{"role", "user"}, {"content", std::move(content)}}; };
    if (name == "test_simple_prompt")
      return json{{"messages", json::array({user({{"type", "text"}, {"text", "This is a simple prompt for testing."}})})}};
    if (name == "test_prompt_with_arguments")
      return json{{"messages", json::array({user({{"type", "text"},
                                                  {"text", "Prompt with arguments: arg1='" + arg("arg1") +
                                                               "', arg2='" + arg("arg2") + "'"}})})}};
    if (name == "test_prompt_with_embedded_resource")
      return json{{"messages",
                   json::array({user({{"type", "resource"},
                                      {"resource", {{"uri", arg("resourceUri")},
                                                    {"mimeType", "text/plain"},
                                                    {"text", "Embedded resource content for testing."}}}}),
                                user({{"type", "text"}, {"text", "Please process the embedded resource above."}})})}};
    if (name == "test_prompt_with_image")
      return json{{"messages", json::array({user({{"type", "image"}, {"data", kPng}, {"mimeType", "image/png"}}),
                                            user({{"type", "text"}, {"text", "Please analyze the image above."}})})}};
    throw RpcError{rpc_error::kInvalidParams, "Unknown prompt: " + name, nullptr};
  };
  server.add_method("prompts/get", get);
  MethodSpec complete;
  complete.handler = [](const json& params, RequestContext&) {
    std::string value = params.value("argument", json::object()).value("value", std::string());
    static const std::vector<std::string> kWords = {"paris", "park", "party", "hello", "world"};
    json values = json::array();
    for (const auto& w : kWords)
      if (w.rfind(value, 0) == 0) values.push_back(w);
    return json{{"completion", {{"values", values}, {"total", values.size()}, {"hasMore", false}}}};
  };
  server.add_method("completion/complete", complete);
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
         // SEP-1613 and SEP-2106: $schema, $defs with $anchor, composition and
         // conditional keywords must reach the client unchanged.
         json{{"$schema", "https://json-schema.org/draft/2020-12/schema"},
              {"type", "object"},
              {"$defs", {{"address", {{"$anchor", "addressDef"},
                                      {"type", "object"},
                                      {"properties", {{"street", {{"type", "string"}}},
                                                      {"city", {{"type", "string"}}}}}}}}},
              {"properties", {{"name", {{"type", "string"}}},
                              {"address", {{"$ref", "#/$defs/address"}}},
                              {"contactMethod", {{"type", "string"}, {"enum", {"phone", "email"}}}},
                              {"phone", {{"type", "string"}}},
                              {"email", {{"type", "string"}}}}},
              {"allOf", json::array({{{"anyOf", json::array({{{"required", {"phone"}}},
                                                             {{"required", {"email"}}}})}}})},
              {"if", {{"properties", {{"contactMethod", {{"const", "phone"}}}}}, {"required", {"contactMethod"}}}},
              {"then", {{"required", {"phone"}}}},
              {"else", {{"required", {"email"}}}},
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
  // Diagnostic tools of conformance 0.2 (2026-07-28): one that needs a client
  // capability (-32021 without it) and one that logs (silent without logLevel).
  t.add({"test_missing_capability", "Needs sampling",
         "Requires the client's sampling capability (modern era: -32021 without it).", no_args(), nullptr,
         read_only(), json{{"sampling", json::object()}}},
        [](const json&, RequestContext&) { return ToolResult::text("client declared sampling"); });
  t.add({"test_logging_tool", "Logging", "Logs one message at each of info and warning (conformance fixture).",
         no_args(), nullptr, read_only(), nullptr},
        [](const json&, RequestContext& ctx) {
          ctx.log("info", "logging tool: info");
          ctx.log("warning", "logging tool: warning");
          return ToolResult::text("logged");
        });
  // Pure functions of their arguments: answered without a thread hand-off.
  for (const char* name : {"test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
                           "test_multiple_content_types", "test_error_handling", "json_schema_2020_12_tool",
                           "test_echo"})
    t.set_runs_inline(name);
  register_client_request_fixtures(server);
  register_input_required_fixtures(server);
  register_task_fixtures(server);
  register_resource_fixtures(server);
  register_prompt_fixtures(server);
}

}  // namespace sandcastle::mcp
