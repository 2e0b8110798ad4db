// Conformance fixtures for 2026-07-28 multi-round-trip requests (SEP-2322):
// tools (and one prompt) that need the client's answers, asked for with
// InputRequired and completed when the request comes back with them.
#include <string>
#include <vector>

#include "server/fixtures.h"
#include "mcp/input_required.h"

namespace sandcastle::mcp {

namespace {

json text_schema(const char* field) {
  return json{
      {"type", "object"}, {"properties", {{field, {{"type", "string"}}}}}, {"required", {field}}};
}

json elicit(const std::string& message, json schema) {
  return json{{"method", "elicitation/create"},
              {"params", {{"message", message}, {"requestedSchema", std::move(schema)}}}};
}

json sample(const std::string& text, int max_tokens) {
  return json{
      {"method", "sampling/createMessage"},
      {"params",
       {{"messages",
         json::array({{{"role", "user"}, {"content", {{"type", "text"}, {"text", text}}}}})},
        {"maxTokens", max_tokens}}}};
}

json roots() {
  return json{{"method", "roots/list"}, {"params", json::object()}};
}

// The answer under `key`, if the client sent one (extra keys are ignored).
const json* answer(const RequestContext& ctx, const char* key) {
  const json& r = ctx.input_responses();
  if (!r.is_object()) return nullptr;
  auto it = r.find(key);
  return it == r.end() ? nullptr : &*it;
}

// An elicitation answer's field, or "?" when the answer has another shape.
std::string field(const json* a, const char* name) {
  if (!a || !a->is_object()) return "?";
  const json& c = a->value("content", json::object());
  return c.is_object() && c.contains(name) && c[name].is_string() ? c[name].get<std::string>()
                                                                  : "?";
}

// A sampling answer's text.
std::string sampled(const json* a) {
  if (!a || !a->is_object()) return "?";
  const json& c = a->value("content", json::object());
  return c.is_object() ? c.value("text", std::string("?")) : std::string("?");
}

int round_of(const RequestContext& ctx) {
  return ctx.request_state() && ctx.request_state()->is_object()
             ? ctx.request_state()->value("round", 0)
             : 0;
}

// Every key in `keys` answered, else InputRequired for the missing ones.
void require(const RequestContext& ctx, const json& requests, std::optional<json> state) {
  InputRequired more;
  for (const auto& [key, req] : requests.items())
    if (!answer(ctx, key.c_str())) more.input_requests[key] = req;
  if (more.input_requests.empty()) return;
  more.state = std::move(state);
  throw std::move(more);
}

}  // namespace

json input_required_prompt(const RequestContext& ctx) {
  require(
      ctx,
      json{{"user_context", elicit("What context should the prompt use?", text_schema("context"))}},
      std::nullopt);
  const std::string context = field(answer(ctx, "user_context"), "context");
  return json{
      {"description", "A prompt completed with the client's input"},
      {"messages",
       json::array({{{"role", "user"},
                     {"content", {{"type", "text"}, {"text", "Use this context: " + context}}}}})}};
}

void register_input_required_fixtures(Server& server) {
  ToolRegistry& t = server.tools();
  const json no_args{{"type", "object"}, {"properties", json::object()}};
  auto add = [&](const char* name, const char* description, ToolHandler fn) {
    t.add({name, name, description, no_args, nullptr, json{{"readOnlyHint", true}}, nullptr},
          std::move(fn));
  };

  add("test_input_required_result_elicitation",
      "Asks the user's name through InputRequired (conformance fixture).",
      [](const json&, RequestContext& ctx) {
        require(ctx, json{{"user_name", elicit("What is your name?", text_schema("name"))}},
                std::nullopt);
        return ToolResult::text("Hello, " + field(answer(ctx, "user_name"), "name") + "!");
      });
  add("test_input_required_result_sampling",
      "Asks the client's model a question through InputRequired.",
      [](const json&, RequestContext& ctx) {
        require(ctx, json{{"capital_question", sample("What is the capital of France?", 100)}},
                std::nullopt);
        return ToolResult::text("The model said: " + sampled(answer(ctx, "capital_question")));
      });
  add("test_input_required_result_list_roots", "Asks for the client's roots through InputRequired.",
      [](const json&, RequestContext& ctx) {
        require(ctx, json{{"client_roots", roots()}}, std::nullopt);
        std::string uris;
        const json* a = answer(ctx, "client_roots");
        if (a && a->is_object() && a->contains("roots") && (*a)["roots"].is_array())
          for (const auto& r : (*a)["roots"])
            uris += (uris.empty() ? "" : ", ") + r.value("uri", std::string("?"));
        return ToolResult::text("Client roots: " + (uris.empty() ? std::string("none") : uris));
      });
  add("test_input_required_result_request_state",
      "Round-trips a signed requestState (conformance fixture).",
      [](const json&, RequestContext& ctx) {
        json confirm =
            elicit("Please confirm", json{{"type", "object"},
                                          {"properties", {{"ok", {{"type", "boolean"}}}}},
                                          {"required", {"ok"}}});
        if (round_of(ctx) != 1 || !answer(ctx, "confirm")) {
          InputRequired more;
          more.input_requests["confirm"] = confirm;
          more.state = json{{"round", 1}, {"tool", "request_state"}};
          throw std::move(more);
        }
        return ToolResult::text("state-ok: the requestState came back intact");
      });
  add("test_input_required_result_multiple_inputs",
      "Asks for three inputs at once (conformance fixture).", [](const json&, RequestContext& ctx) {
        require(ctx,
                json{{"user_name", elicit("What is your name?", text_schema("name"))},
                     {"greeting", sample("Generate a greeting", 50)},
                     {"client_roots", roots()}},
                json{{"round", 1}});
        return ToolResult::text("Hello " + field(answer(ctx, "user_name"), "name") + ": " +
                                sampled(answer(ctx, "greeting")));
      });
  add("test_input_required_result_multi_round",
      "Asks in two rounds with evolving state (conformance fixture).",
      [](const json&, RequestContext& ctx) {
        const int round = round_of(ctx);
        if (round == 0 || (round == 1 && !answer(ctx, "step1"))) {
          InputRequired more;
          more.input_requests["step1"] = elicit("Step 1: What is your name?", text_schema("name"));
          more.state = json{{"round", 1}};
          throw std::move(more);
        }
        if (round == 1 || !answer(ctx, "step2")) {
          const std::string name = round == 1
                                       ? field(answer(ctx, "step1"), "name")
                                       : ctx.request_state()->value("name", std::string("?"));
          InputRequired more;
          more.input_requests["step2"] =
              elicit("Step 2: What is your favorite color?", text_schema("color"));
          more.state = json{{"round", 2}, {"name", name}};
          throw std::move(more);
        }
        return ToolResult::text(ctx.request_state()->value("name", std::string("?")) + " likes " +
                                field(answer(ctx, "step2"), "color"));
      });
  add("test_input_required_result_tampered_state",
      "Rejects an altered requestState (conformance fixture).",
      [](const json&, RequestContext& ctx) {
        // A tampered state never gets here: the server's signature check
        // answers -32602 first.
        if (round_of(ctx) != 1) {
          InputRequired more;
          more.input_requests["confirm"] = elicit("Please confirm", text_schema("ok"));
          more.state = json{{"round", 1}};
          throw std::move(more);
        }
        return ToolResult::text("state verified");
      });
  // In 2026-07-28 a request's stream carries only its own notifications and
  // its result: an elicitation is asked for with InputRequired, never sent
  // as a request of the server's own.
  add("test_streaming_elicitation",
      "Asks for a confirmation through InputRequired, never as a server request.",
      [](const json&, RequestContext& ctx) {
        require(ctx,
                json{{"confirmation", elicit("Please confirm to continue", text_schema("answer"))}},
                std::nullopt);
        return ToolResult::text("Confirmed: " + field(answer(ctx, "confirmation"), "answer"));
      });
  add("test_input_required_result_capabilities",
      "Asks only for what the client declared (conformance fixture).",
      [](const json&, RequestContext& ctx) {
        const json& caps = ctx.client_capabilities();
        auto has = [&](const char* c) { return caps.is_object() && caps.contains(c); };
        json wanted = json::object();
        if (has("elicitation"))
          wanted["user_name"] = elicit("What is your name?", text_schema("name"));
        if (has("sampling"))
          wanted["capital_question"] = sample("What is the capital of France?", 100);
        if (has("roots")) wanted["client_roots"] = roots();
        require(ctx, wanted, std::nullopt);
        return ToolResult::text(wanted.empty()
                                    ? "no client features declared: nothing to ask"
                                    : "received " + std::to_string(wanted.size()) + " answer(s)");
      });
}

}  // namespace sandcastle::mcp
