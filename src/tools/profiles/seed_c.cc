// seed-c: code-sandbox-mcp's tools over a one-shot execute_code. What
// differs on purpose: the real exit code (the seed says 1 for every
// failure), stdout kept beside stderr on a failure, a failure marked
// isError, and the sandbox's own limits (30 s as there; no network).
#include "tools/profiles/seed_c.h"

#include "service/images.h"
#include "tools/adapter.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace seed_c {

namespace {

// The seed's run timeout (llm-sandbox's session_timeout).
constexpr double kTimeoutS = 30;

std::string trimmed(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const auto b = s.find_first_not_of(ws);
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace

std::string failure_json(int exit_code, const std::string& stderr_text,
                         const std::string& stdout_text) {
  return json{{"exit_code", exit_code}, {"stderr", stderr_text}, {"stdout", stdout_text}}.dump(
      2, ' ', false, json::error_handler_t::replace);
}

bool failed(const service::RunResult& r) {
  return r.failed || r.exit_code != 0 || r.error.is_object();
}

std::string result_text(const service::RunResult& r, const std::string& language) {
  std::string out = trimmed(r.stdout_data);
  if (!failed(r) && !out.empty()) return out;
  std::string err = trimmed(r.stderr_data);
  auto add = [&err](const std::string& line) {
    if (!line.empty()) err += (err.empty() ? "" : "\n") + line;
  };
  // A kernel run reports an exception apart from stderr.
  if (err.empty() && r.error.is_object())
    add(r.error.value("name", "Error") + ": " + r.error.value("value", ""));
  if (r.timed_out())
    add("the code ran past the " + std::to_string(static_cast<int>(kTimeoutS)) +
        " s timeout and was stopped; make it faster");
  else if (failed(r))
    add(r.hint);
  else
    add(language == "javascript" ? "No output, forgot console.logs?"
                                 : "No output, forgot print()?");
  int code = r.exit_code;
  if (code == 0 && failed(r)) code = r.signal != 0 ? 128 + r.signal : 1;
  return failure_json(code, err, out);
}

json environments(const service::Config& config) {
  json out = json::object();
  for (const char* lang : {"python", "javascript"}) {
    const std::string image = default_image_for(config, lang);
    const std::string manager = std::string(lang) == "python" ? "pip" : "npm";
    out[lang] = {{"image", image},
                 {"installed_libraries",
                  (image == "host" ? std::string("the standard library and the host's own ") +
                                         manager + " packages"
                                   : "those of image " + image) +
                      "; code runs without network, so it cannot install more"}};
  }
  return out;
}

}  // namespace seed_c

namespace {

ToolResult run(ToolEnv& env, const std::string& language, const json& args, RequestContext& ctx) {
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  auto r = service::run_code(
      env, Caller{owner_of(ctx), {}},
      json{{"code", args["code"]}, {"language", language}, {"timeout_s", 30}}, opts);
  if (!r.ok()) {
    // The seed's shape for an exception, with sandcastle's message.
    return ToolResult::error(seed_c::failure_json(
        1, r.error().message() + " [" + error_code_name(r.error().code) + "]", ""));
  }
  ToolResult res = ToolResult::text(seed_c::result_text(*r, language));
  res.is_error = seed_c::failed(*r);
  return res;
}

mcp::ToolDefinition run_tool(const std::string& name, const std::string& title,
                             const std::string& what) {
  return {name,
          title,
          "Execute " + what +
              " code in the sandbox environment and captures the standard output and error. "
              "Each call runs in a fresh, isolated sandbox (nothing persists between calls) "
              "with a 30 s timeout and no network. Returns the output as text; on an error "
              "or when nothing was printed, JSON {exit_code, stderr, stdout}.",
          json{{"type", "object"},
               {"properties",
                {{"code",
                  {{"type", "string"},
                   {"description", "The " + what + " code to execute (see the resource " +
                                       std::string(seed_c::kEnvironmentsUri) +
                                       " for its libraries)"}}}}},
               {"required", {"code"}},
               {"additionalProperties", false}},
          nullptr,
          hints(false, false, false),
          nullptr};
}

void register_environments(mcp::Server& server, ToolEnv& env) {
  mcp::MethodSpec list;
  list.cacheable = true;  // 2026-07-28 wants ttlMs/cacheScope, as sandcastle's own list
  list.handler = [](const json&, RequestContext&) {
    return json{{"resources", json::array({{{"uri", seed_c::kEnvironmentsUri},
                                            {"name", "environment_details"},
                                            {"description",
                                             "Resource containing detailed information about the "
                                             "environments: each language's image and libraries."},
                                            {"mimeType", "text/plain"}}})}};
  };
  server.add_method("resources/list", std::move(list));

  mcp::MethodSpec read;
  read.cacheable = true;
  read.handler = [&env](const json& params, RequestContext& ctx) {
    const std::string uri = params.value("uri", "");
    if (uri != seed_c::kEnvironmentsUri)
      throw mcp::RpcError{ctx.era() == mcp::Era::kModern ? mcp::rpc_error::kInvalidParams
                                                         : mcp::rpc_error::kResourceNotFound,
                          "Resource not found: " + uri + " (this server has one resource, " +
                              seed_c::kEnvironmentsUri + ")",
                          json{{"uri", uri}}};
    return json{{"contents", json::array({{{"uri", uri},
                                           {"mimeType", "text/plain"},
                                           {"text", seed_c::environments(env.config).dump(2)}}})}};
  };
  server.add_method("resources/read", std::move(read));
}

}  // namespace

void seed_c::register_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(run_tool("run_python_code", "Run Python code", "Python"),
                     [&env](const json& a, RequestContext& c) { return run(env, "python", a, c); });
  // The README names it run_js_code, the seed's code run_javascript_code:
  // prompts written for either keep working.
  for (const char* name : {"run_js_code", "run_javascript_code"})
    server.tools().add(
        run_tool(name, "Run JavaScript code", "JavaScript (Node.js)"),
        [&env](const json& a, RequestContext& c) { return run(env, "javascript", a, c); });
  register_environments(server, env);
}

std::string seed_c::instructions() {
  return "This MCP server allows you to execute code in a secure sandbox environment "
         "(sandcastle, serving code-sandbox-mcp's tools). run_python_code runs Python, "
         "run_js_code (also run_javascript_code) runs JavaScript on Node.js; each call starts "
         "a fresh sandbox with a 30 s timeout and no network, so print what you need. The "
         "resource sandbox://environments lists each language's image and libraries.";
}

}  // namespace sandcastle::tools
