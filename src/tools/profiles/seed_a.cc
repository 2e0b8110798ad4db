// seed-a: mcp-code-sandbox's ten tools over sandcastle's service layer and
// file tools. Results keep the seed's shapes (plain sentences for create and
// close, {logs, error} for runs, {path, content} for files); what differs on
// purpose: real timeouts and limits, the sandbox's errors with what to do,
// and uploads that land in /workspace instead of the unwritable root.
#include "tools/profiles/seed_a.h"

#include <sstream>

#include "service/file_listing.h"
#include "service/lifecycle.h"
#include "service/packages.h"
#include "tools/adapter.h"
#include "tools/file_tools.h"
#include "tools/profiles/schema.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace seed_a {

json e2b_lines(std::string_view text) {
  json out = json::array();
  while (!text.empty()) {
    const auto nl = text.find('\n');
    const auto n = nl == std::string_view::npos ? text.size() : nl + 1;
    out.push_back(std::string(text.substr(0, n)));
    text.remove_prefix(n);
  }
  return out;
}

namespace {

// The seed's schemas accept no other arguments.
json closed_schema(json properties, json required) {
  return profiles::object_schema(std::move(properties), std::move(required), true);
}

// The error of a run that ended badly without an exception of its own.
json ending_error(const service::RunResult& r) {
  std::string name = "ExecutionError";
  std::string value = r.hint;
  if (r.timed_out()) {
    name = "TimeoutError";
    value =
        "the code ran past its timeout and was stopped; make it faster or split it into "
        "shorter execute_code calls";
  } else if (r.reason == "oom") {
    name = "MemoryError";
  } else if (value.empty()) {
    value = "the code ended with exit code " + std::to_string(r.exit_code) +
            (r.reason.empty() ? "" : " (" + r.reason + ")");
  }
  if (r.kernel && r.kernel->state_lost)
    value += "; the interpreter was restarted: variables and imports from earlier calls are gone";
  return json{{"name", name}, {"value", value}, {"traceback", ""}};
}

}  // namespace

json execution_json(const service::RunResult& r) {
  json error = nullptr;
  if (r.error.is_object()) {
    error = r.error;
    // E2B's traceback is one string; the kernel sends its lines.
    if (const auto tb = error.find("traceback"); tb != error.end() && tb->is_array()) {
      std::string joined;
      for (const auto& line : *tb) joined += (joined.empty() ? "" : "\n") + line.get<std::string>();
      *tb = joined;
    }
  } else if (r.failed || r.exit_code != 0)
    error = ending_error(r);
  return json{
      {"logs", {{"stdout", e2b_lines(r.stdout_data)}, {"stderr", e2b_lines(r.stderr_data)}}},
      {"error", error}};
}

namespace {

bool has_dotdot(const std::string& path) {
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');)
    if (part == "..") return true;
  return false;
}

}  // namespace

Result<std::string> upload_path(const std::string& destination_path, const std::string& file_name) {
  auto refuse = [&](const std::string& why) {
    return Error::make(ErrorCode::kInvalidArgument,
                       "file_name '" + file_name + "' " + why +
                           "; pass a plain file name and the directory as destination_path");
  };
  if (file_name.empty()) return refuse("is empty");
  if (file_name.front() == '/') return refuse("is absolute");
  if (has_dotdot(file_name)) return refuse("leaves its directory (\"..\")");
  // The sandbox resolves the path, but a ".." would still let the seed's
  // callers write outside the folder they named; refused as for file_name.
  if (has_dotdot(destination_path))
    return Error::make(ErrorCode::kInvalidArgument,
                       "destination_path '" + destination_path +
                           "' leaves its directory (\"..\"); pass the directory itself");
  std::string dir = destination_path;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || dir == "/") dir = "/workspace";
  if (dir.front() != '/') dir = "/workspace/" + dir;
  return dir + "/" + file_name;
}

}  // namespace seed_a

namespace {

constexpr const char* kInterpreter = "sandcastle";

json session_id_schema(const char* what) {
  return json{{"type", "string"}, {"minLength", 1}, {"maxLength", 64}, {"description", what}};
}

// The seed answers most failures with {"error": "..."}; here they are also
// isError, so a client and the model both see that the call failed.
ToolResult seed_error(const std::string& message) {
  return ToolResult::error(mcp::dump_message(json{{"error", message}}));
}

std::string no_session(const std::string& id) {
  return "No sandbox found with session ID: " + id +
         ". Create a sandbox first with create_sandbox (you choose the session_id).";
}

bool session_exists(ToolEnv& env, const std::string& id, const RequestContext& ctx) {
  auto [live, dormant] = env.manager.find_any(id, owner_of(ctx));
  return live || dormant;
}

// The text of an isError result from a sandcastle tool, under the seed's
// "Error <doing>: ..." prefix.
ToolResult wrapped_error(const std::string& doing, const ToolResult& r) {
  std::string text;
  for (const auto& c : r.content)
    if (c.value("type", "") == "text") text += c["text"].get<std::string>();
  return seed_error("Error " + doing + ": " + text);
}

ToolResult create(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  const std::string exists = "Sandbox with session ID " + id + " already exists.";
  if (session_exists(env, id, ctx)) return ToolResult::text(exists);
  auto made = service::create_sandbox(env, Caller{owner_of(ctx), {}},
                                      json{{"name", id}, {"language", "python"}});
  if (!made.ok()) {
    if (made.error().code == ErrorCode::kAlreadyExists) return ToolResult::text(exists);
    return ToolResult::error("Failed to create sandbox: " + made.error().message() + " [" +
                             error_code_name(made.error().code) + "]");
  }
  return ToolResult::text("Sandbox created successfully with session ID: " + id);
}

ToolResult close(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  // As the seed: an unknown id is not an error (a client retrying a close
  // must not loop), but says so.
  if (!session_exists(env, id, ctx))
    return ToolResult::text("Sandbox with session ID " + id +
                            " is not active or has already been closed.");
  auto r = service::close_sandbox(env, Caller{owner_of(ctx), {}}, id);
  if (!r.ok()) return error_result(r.error());
  return ToolResult::text("Sandbox with session ID " + id +
                          " has been successfully closed and all resources freed.");
}

ToolResult status(ToolEnv& env, const json& args, RequestContext& ctx) {
  if (args.contains("session_id")) {
    const std::string id = args["session_id"];
    auto [live, dormant] = env.manager.find_any(id, owner_of(ctx));
    if (!live && !dormant) return seed_error(no_session(id));
    return ToolResult::from_structured(json{{"status", live ? "active" : "paused"},
                                            {"session_id", id},
                                            {"interpreter_type", kInterpreter}});
  }
  json sessions = json::array();
  for (const auto& e : env.manager.list(owner_of(ctx))) sessions.push_back(e->name());
  const std::size_t n = sessions.size();
  return ToolResult::from_structured(json{{"active_sandbox_count", n},
                                          {"active_sessions", std::move(sessions)},
                                          {"interpreter_type", kInterpreter}});
}

// The run's images (matplotlib figures, display()) follow the JSON text as
// image content, which the seed could not return.
ToolResult run_result(const service::RunResult& r, json out) {
  ToolResult res = ToolResult::from_structured(std::move(out));
  auto add = [&](const service::MimeBundle& b) {
    for (const auto& img : b.images)
      res.content.push_back({{"type", "image"}, {"data", img.base64}, {"mimeType", img.mime_type}});
  };
  if (r.result) add(*r.result);
  for (const auto& d : r.displays) add(d);
  res.is_error = r.failed;
  return res;
}

ToolResult execute(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  auto r = service::run_code(env, Caller{owner_of(ctx), {}},
                             json{{"sandbox_id", id}, {"code", args["code"]}}, opts);
  if (!r.ok()) return seed_error("Error executing code: " + r.error().message());
  return run_result(*r, seed_a::execution_json(*r));
}

ToolResult run_once(ToolEnv& env, const json& args, RequestContext& ctx) {
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  auto r = service::run_code(env, Caller{owner_of(ctx), {}},
                             json{{"code", args["code"]}, {"language", "python"}}, opts);
  if (!r.ok()) return seed_error("Operation failed: " + r.error().message());
  json out = seed_a::execution_json(*r);
  out["sandbox_status"] = "created and will be closed automatically";
  out["sandbox_closed"] = true;
  out["sandbox_removed"] = true;
  return run_result(*r, std::move(out));
}

// "pip install NAME": the seed passed package_name to a shell; here its
// words are package specs the installer checks (no options, no URLs).
ToolResult install(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  const std::string name = args["package_name"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  json packages = json::array();
  std::istringstream words(name);
  for (std::string w; words >> w;) packages.push_back(w);
  auto r = service::install_packages(
      env, Caller{owner_of(ctx), {}},
      json{{"sandbox_id", id}, {"packages", packages}, {"manager", "pip"}});
  if (!r.ok()) return seed_error("Error installing package: " + r.error().message());
  json stdout_lines = json::array();
  for (const auto& p : (*r)["packages"])
    if (p["status"] == "success")
      stdout_lines.push_back("Successfully installed " + p["package"].get<std::string>() +
                             (p.contains("version") ? "-" + p["version"].get<std::string>() : "") +
                             "\n");
  json error = nullptr;
  if ((*r)["status"] != "success")
    error = json{{"name", r->value("cause", "InstallError")},
                 {"value", r->value("error", "the install failed")},
                 {"traceback", r->contains("log")
                                   ? "full installer log: " + (*r)["log"]["path"].get<std::string>()
                                   : ""}};
  ToolResult res = ToolResult::from_structured(
      json{{"package", name},
           {"output", {{"stdout", stdout_lines}, {"stderr", json::array()}}},
           {"error", error}});
  res.is_error = !error.is_null();
  return res;
}

ToolResult list(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  auto r = file_ops::list(
      env, json{{"sandbox_id", id}, {"path", args["path"]}, {"recursive", false}}, ctx);
  if (r.is_error) return wrapped_error("listing files", r);
  // E2B's EntryInfo: type "file" or "dir".
  json files = json::array();
  for (const auto& f : r.structured["files"])
    files.push_back(json{{"name", f["name"]},
                         {"type", f["type"] == "directory" ? "dir" : f["type"]},
                         {"path", f["path"]},
                         {"size", f["size"]},
                         {"mode", f["mode"]},
                         {"modified_time", f["modified"]}});
  return ToolResult::from_structured(json{{"path", args["path"]}, {"files", std::move(files)}});
}

ToolResult read(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  auto r = file_ops::read(
      env,
      json{{"sandbox_id", id}, {"path", args["file_path"]}, {"encoding", "text"}, {"offset", 0}},
      ctx);
  if (r.is_error) return wrapped_error("reading file", r);
  return ToolResult::from_structured(
      json{{"path", args["file_path"]}, {"content", std::move(r.structured["content"])}});
}

ToolResult write_to(ToolEnv& env, const std::string& id, const std::string& path,
                    const json& content, const char* message, RequestContext& ctx) {
  auto r = file_ops::write(env,
                           json{{"sandbox_id", id},
                                {"path", path},
                                {"content", content},
                                {"encoding", "text"},
                                {"executable", false}},
                           ctx);
  if (r.is_error) return wrapped_error("writing file", r);
  return ToolResult::from_structured(json{{"path", path}, {"message", message}});
}

ToolResult write(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  return write_to(env, id, args["file_path"], args["content"], "File written successfully", ctx);
}

ToolResult upload(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["session_id"];
  if (!session_exists(env, id, ctx)) return seed_error(no_session(id));
  auto path = seed_a::upload_path(args["destination_path"], args["file_name"]);
  if (!path.ok()) return seed_error("Error uploading file: " + path.error().message());
  return write_to(env, id, *path, args["file_content"], "File uploaded successfully", ctx);
}

json logs_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"stdout", {{"type", "array"}, {"items", {{"type", "string"}}}}},
                {"stderr", {{"type", "array"}, {"items", {{"type", "string"}}}}}}}};
}

json run_output_schema() {
  return json{{"type", "object"},
              {"properties", {{"logs", logs_schema()}, {"error", {{"type", {"object", "null"}}}}}},
              {"required", {"logs", "error"}}};
}

using Handler = ToolResult (*)(ToolEnv&, const json&, RequestContext&);

void add(mcp::Server& server, ToolEnv& env, mcp::ToolDefinition def, Handler h) {
  server.tools().add(std::move(def),
                     [&env, h](const json& a, RequestContext& c) { return h(env, a, c); });
}

}  // namespace

void seed_a::register_tools(mcp::Server& server, ToolEnv& env) {
  const json sid = session_id_schema(
      "The unique identifier for the sandbox session (you choose it at create_sandbox).");
  const json path_arg{{"type", "string"},
                      {"description",
                       "Path inside the sandbox: absolute, or relative to the working directory "
                       "/workspace."}};
  const json file_result{
      {"type", "object"},
      {"properties", {{"path", {{"type", "string"}}}, {"message", {{"type", "string"}}}}},
      {"required", {"path", "message"}}};

  add(server, env,
      {"create_sandbox", "Create sandbox",
       "Create a new sandbox environment for code execution. session_id is a unique identifier "
       "you choose; pass it to every other tool. Python state (variables, imports), files and "
       "installed packages persist in the sandbox until close_sandbox.",
       closed_schema({{"session_id", session_id_schema("A unique identifier for the sandbox "
                                                       "session (at most 64 characters).")}},
                     {"session_id"}),
       nullptr, hints(false, false, true), nullptr},
      create);
  add(server, env,
      {"close_sandbox", "Close sandbox",
       "Close and clean up a sandbox environment: its processes and files are destroyed.",
       closed_schema({{"session_id", sid}}, {"session_id"}), nullptr, hints(false, true, true),
       nullptr},
      close);
  add(server, env,
      {"get_sandbox_status", "Sandbox status",
       "Get status information about sandboxes: one session's, or without session_id the count "
       "and session ids of your active sandboxes.",
       json{{"type", "object"},
            {"properties", {{"session_id", sid}}},
            {"additionalProperties", false}},
       json{{"type", "object"}}, read_only_hints(), nullptr},
      status);
  add(server, env,
      {"execute_code", "Execute Python code",
       "Execute Python code in the sandbox environment. Runs in the session's persistent "
       "interpreter: variables and imports from earlier calls are still there. Returns logs "
       "(stdout and stderr, one entry per line) and error ({name, value, traceback}, or null); "
       "figures come back as images. The sandbox has no network.",
       closed_schema(
           {{"session_id", sid},
            {"code", {{"type", "string"}, {"description", "The Python code to execute"}}}},
           {"session_id", "code"}),
       run_output_schema(), hints(false, false, false), nullptr},
      execute);
  add(server, env,
      {"install_package", "Install Python package",
       "Install a Python package in the sandbox with pip (several, separated by spaces, are "
       "installed together). Only the installer reaches the package index.",
       closed_schema({{"session_id", sid},
                      {"package_name",
                       {{"type", "string"},
                        {"minLength", 1},
                        {"description", "The name of the Python package to install"}}}},
                     {"session_id", "package_name"}),
       json{{"type", "object"},
            {"properties",
             {{"package", {{"type", "string"}}},
              {"output", logs_schema()},
              {"error", {{"type", {"object", "null"}}}}}},
            {"required", {"package", "output", "error"}}},
       hints(false, false, true, true), nullptr},
      install);
  json once_schema = run_output_schema();
  once_schema["properties"]["sandbox_status"] = {{"type", "string"}};
  once_schema["properties"]["sandbox_closed"] = {{"type", "boolean"}};
  once_schema["properties"]["sandbox_removed"] = {{"type", "boolean"}};
  add(server, env,
      {"create_run_close", "Run Python code once",
       "Create a sandbox, run Python code, and close the sandbox in one operation: for simple "
       "one-off code executions. Returns the execution results as execute_code does.",
       closed_schema(
           {{"code", {{"type", "string"}, {"description", "The Python code to execute"}}}},
           {"code"}),
       once_schema, hints(false, false, false), nullptr},
      run_once);
  add(server, env,
      {"list_files", "List files",
       "List files in the sandbox at the specified path (default: the root directory).",
       closed_schema({{"session_id", sid},
                      {"path",
                       {{"type", "string"},
                        {"default", "/"},
                        {"description", "The directory path to list files from"}}}},
                     {"session_id"}),
       json{{"type", "object"},
            {"properties", {{"path", {{"type", "string"}}}, {"files", {{"type", "array"}}}}},
            {"required", {"path", "files"}}},
       read_only_hints(), nullptr},
      list);
  add(server, env,
      {"read_file", "Read file", "Read the contents of a text file in the sandbox.",
       closed_schema({{"session_id", sid}, {"file_path", path_arg}}, {"session_id", "file_path"}),
       json{{"type", "object"},
            {"properties", {{"path", {{"type", "string"}}}, {"content", {{"type", "string"}}}}},
            {"required", {"path", "content"}}},
       read_only_hints(), nullptr},
      read);
  add(server, env,
      {"write_file", "Write file",
       "Write content to a file in the sandbox, creating parent directories.",
       closed_schema({{"session_id", sid},
                      {"file_path", path_arg},
                      {"content", {{"type", "string"}, {"description", "The content to write"}}}},
                     {"session_id", "file_path", "content"}),
       file_result, hints(false, true, true), nullptr},
      write);
  add(server, env,
      {"upload_file", "Upload file",
       "Upload a file to the sandbox: file_content is written as file_name in destination_path "
       "(default \"/\", which means the working directory /workspace).",
       closed_schema(
           {{"session_id", sid},
            {"file_name",
             {{"type", "string"},
              {"minLength", 1},
              {"description", "The name of the file to create"}}},
            {"file_content", {{"type", "string"}, {"description", "The file's content"}}},
            {"destination_path",
             {{"type", "string"},
              {"default", "/"},
              {"description", "The directory where the file is created (\"/\": /workspace)"}}}},
           {"session_id", "file_name", "file_content"}),
       file_result, hints(false, true, true), nullptr},
      upload);
}

std::string seed_a::instructions() {
  return "Runs Python code in isolated sandboxes (sandcastle, serving mcp-code-sandbox's tools). "
         "Call create_sandbox with a session_id you choose, then execute_code, install_package, "
         "list_files, read_file, write_file and upload_file with that session_id; variables, "
         "files and packages persist in the session until close_sandbox. create_run_close runs "
         "one snippet in a fresh sandbox and removes it. get_sandbox_status lists your sessions. "
         "Code has no network; only install_package reaches the package index.";
}

}  // namespace sandcastle::tools
