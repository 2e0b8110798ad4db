// Profile seed-d (python-mcp-sandbox): its seven tools with their argument
// names and JSON results, as thin adapters over the service layer. Every
// call acts for its own request's owner (the API key's, over HTTP).
#include "tools/profiles/seed_d.h"

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "service/file_transfer.h"
#include "service/host_paths.h"
#include "service/lifecycle.h"
#include "service/packages.h"
#include "tools/adapter.h"
#include "tools/profiles/schema.h"

namespace sandcastle::tools::seed_d {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

using profiles::object_schema;
using profiles::string_arg;

constexpr const char* kSeedResults = "/app/results";
// The seed answers an install after at most this long, "installing" if it
// has not finished; check_package_installation_status waits as long again.
constexpr std::chrono::seconds kInstallWait{5};
constexpr std::chrono::milliseconds kInstallPoll{100};

json sandbox_id_arg() {
  return string_arg("The sandbox ID (from create_sandbox or list_sandboxes)");
}

Caller caller_of(const RequestContext& ctx) {
  return Caller{owner_of(ctx), {}};
}

// A structured error the schema accepts, with the seed's fields.
ToolResult structured_error(const std::string& text, json structured) {
  return ToolResult::error(text, std::move(structured));
}

ToolResult create(ToolEnv& env, const json& args, RequestContext& ctx) {
  json req{{"language", "python"}};
  if (args.contains("name") && args["name"].is_string()) req["name"] = args["name"];
  auto made = create_sandbox(env, caller_of(ctx), req);
  if (!made.ok()) return error_result(made.error());
  const std::string owner = owner_of(ctx);
  const std::string id = (*made)["sandbox_id"];
  const std::string name = (*made)["name"];
  return ToolResult::from_structured(json{{"sandbox_id", id},
                                          {"user_id", owner.empty() ? "local" : owner},
                                          {"name", name.empty() ? id : name},
                                          {"status", (*made)["status"]}});
}

ToolResult list(ToolEnv& env, RequestContext& ctx) {
  json all = list_sandboxes(env, caller_of(ctx));
  json items = json::array();
  for (const auto& s : all["sandboxes"]) {
    json packages = json::array();
    for (const auto& p : s.value("packages", json::array()))
      if (p.value("status", "") == "success")
        packages.push_back({{"name", p["name"]}, {"version", p.value("version", "")}});
    items.push_back({{"sandbox_id", s["sandbox_id"]},
                     {"name", s.value("name", "")},
                     {"status", s.value("status", "")},
                     {"image", s.value("image", "")},
                     {"created", s.value("created_at", "")},
                     {"last_used", s.value("last_used", "")},
                     {"installed_packages", packages}});
  }
  // As FastMCP returns a list: the JSON array as text, {result: [...]} structured.
  ToolResult res;
  res.content.push_back({{"type", "text"}, {"text", mcp::dump_message(items)}});
  res.structured = json{{"result", items}};
  return res;
}

void add_images(ToolResult& res, const service::MimeBundle& b) {
  for (const auto& img : b.images)
    res.content.push_back({{"type", "image"}, {"data", img.base64}, {"mimeType", img.mime_type}});
}

ToolResult execute_python(ToolEnv& env, const json& args, RequestContext& ctx) {
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  json req{{"sandbox_id", args["sandbox_id"]}, {"code", args["code"]}, {"language", "python"}};
  auto r = service::run_code(env, caller_of(ctx), req, opts);
  if (!r.ok()) return error_result(r.error());
  ToolResult res = ToolResult::from_structured(python_result(*r));
  // Figures shown rather than saved still reach the model, as images.
  if (r->result) add_images(res, *r->result);
  for (const auto& d : r->displays) add_images(res, d);
  if (r->failed) {
    res.is_error = true;
    res.content.push_back({{"type", "text"}, {"text", r->reason + ": " + r->hint}});
  }
  return res;
}

ToolResult execute_terminal(ToolEnv& env, const json& args, RequestContext& ctx) {
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  json req{{"sandbox_id", args["sandbox_id"]}, {"command", args["command"]}};
  auto r = service::run_command(env, caller_of(ctx), req, opts);
  if (!r.ok()) {
    const std::string text = r.error().message() + " [" + error_code_name(r.error().code) + "]";
    return structured_error(text, {{"stdout", ""}, {"stderr", text}, {"exit_code", -1}});
  }
  json out{{"stdout", r->stdout_data}, {"stderr", r->stderr_data}, {"exit_code", r->exit_code}};
  if (!r->failed) return ToolResult::from_structured(std::move(out));
  out["stderr"] = out["stderr"].get<std::string>() + "[" + r->reason + ": " + r->hint + "]";
  return structured_error(mcp::dump_message(out), out);
}

// Sleeps `d` unless the request is cancelled first; false when it is.
bool pause(CancelToken* cancel, std::chrono::milliseconds d) {
  if (!cancel) {
    std::this_thread::sleep_for(d);
    return true;
  }
  std::mutex mu;
  std::condition_variable cv;
  bool woke = false;
  const size_t sub = cancel->on_cancel([&] {
    std::lock_guard lock(mu);
    woke = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait_for(lock, d, [&] { return woke; });
  }
  if (sub) cancel->unsubscribe(sub);
  return !cancel->cancelled();
}

// The seed's status of one package, waiting up to kInstallWait while it
// installs (less if the request is cancelled).
Result<json> await_install(ToolEnv& env, const Caller& c, const json& args, CancelToken* cancel) {
  const std::string package = args["package_name"];
  const auto until = std::chrono::steady_clock::now() + kInstallWait;
  for (;;) {
    auto st = package_status(env, c, {{"sandbox_id", args["sandbox_id"]}, {"package", package}});
    if (!st.ok()) return st.take_error();
    if ((*st)["status"] != "installing" || std::chrono::steady_clock::now() >= until)
      return install_state(package, *st);
    // The install runs on the service's thread and announces nothing: poll.
    if (!pause(cancel, kInstallPoll)) return install_state(package, *st);
  }
}

// Serializes the check for a running install with the start of the next, so
// two calls never both start one (each background install is a thread).
std::mutex& install_start_mu() {
  static std::mutex mu;
  return mu;
}

ToolResult install(ToolEnv& env, const json& args, RequestContext& ctx) {
  const Caller c = caller_of(ctx);
  const std::string package = args["package_name"];
  {
    std::lock_guard lock(install_start_mu());
    auto e = env.manager.get(args["sandbox_id"], c.owner);
    if (!e.ok()) return error_result(e.error());
    for (const auto& p : (*e)->packages())
      if (p.state == PackageState::kInstalling)
        return ToolResult::from_structured(busy_state(package, p.name));
    auto started = install_packages(env, c,
                                    {{"sandbox_id", args["sandbox_id"]},
                                     {"packages", {package}},
                                     {"manager", "pip"},
                                     {"wait", false}});
    if (!started.ok()) return error_result(started.error());
  }
  return tool_result_of(await_install(env, c, args, ctx.cancel_token()));
}

ToolResult check(ToolEnv& env, const json& args, RequestContext& ctx) {
  return tool_result_of(await_install(env, caller_of(ctx), args, ctx.cancel_token()));
}

ToolResult upload(ToolEnv& env, const HostPaths& host, const json& args, RequestContext& ctx) {
  auto fail = [](const Error& err) {
    const std::string text = err.message() + " [" + error_code_name(err.code) + "]";
    return structured_error(text, {{"error", true}, {"message", text}});
  };
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return fail(e.error());
  EntryUse use(*e);
  const std::string source = args["local_file_path"];
  auto fd = host.open_read(source);
  if (!fd.ok()) return fail(fd.error());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return fail(Error::from_errno("stat host file " + source));
  auto lease = reserve_transfer(
      *env.config.transfer_budget,
      std::min<std::uint64_t>(static_cast<std::uint64_t>(st.st_size), env.config.max_file_bytes));
  if (!lease.ok()) return fail(lease.error());
  auto data = read_all(fd->get(), env.config.max_file_bytes, "host file " + source);
  if (!data.ok()) return fail(data.error());
  const std::string dest = upload_target(args.value("dest_path", std::string(kSeedResults)),
                                         std::string_view(source).substr(source.rfind('/') + 1));
  if (auto s = use->sandbox().write_file(dest, *data, 0644, /*parents=*/true); !s.ok())
    return fail(s.error());
  return ToolResult::from_structured(
      json{{"success", true},
           {"message", "Uploaded " + source + " to sandbox " + use->id() + " as " + dest},
           {"path", dest},
           {"size", data->size()}});
}

}  // namespace

json python_result(const service::RunResult& r) {
  std::string err = r.stderr_data;
  if (!r.error.is_null()) {
    // The kernel reports an exception apart; a script prints its traceback.
    const json& tb = r.error.value("traceback", json());
    std::string text;
    if (tb.is_array())
      for (const auto& line : tb) text += line.is_string() ? line.get<std::string>() + "\n" : "";
    else if (tb.is_string())
      text = tb.get<std::string>();
    if (text.empty())
      text = r.error.value("name", "Error") + ": " + r.error.value("value", "") + "\n";
    if (err.find(text) == std::string::npos) err += text;
  }
  json files = json::array(), links = json::array();
  for (const auto& f : r.files_created.value_or(std::vector<service::CreatedFile>{})) {
    files.push_back(f.path);
    links.push_back(f.url.empty() ? f.uri : f.url);
  }
  return json{{"stdout", r.stdout_data},
              {"stderr", err},
              {"exit_code", r.exit_code},
              {"files", files},
              {"file_links", links}};
}

json install_state(const std::string& package, const json& status) {
  const std::string s = status.value("status", "");
  if (s == "success") {
    json out{{"status", "success"},
             {"message", "Successfully installed " + package},
             {"complete", true},
             {"success", true}};
    if (status.contains("version")) out["version"] = status["version"];
    return out;
  }
  if (s == "failed") {
    const std::string error = status.value("error", std::string("the installer failed"));
    return json{{"status", "failed"},
                {"message", "Failed to install " + package + ": " + error},
                {"stderr", error},
                {"complete", true},
                {"success", false}};
  }
  if (s == "installing")
    return json{{"status", "installing"},
                {"message", "Installation of " + package +
                                " in progress. Use check_package_installation_status to monitor "
                                "progress."},
                {"complete", false},
                {"success", nullptr}};
  return json{{"status", "not_found"},
              {"message", "No installation record found for " + package +
                              "; install it with install_package_in_sandbox"},
              {"complete", true},
              {"success", false}};
}

json busy_state(const std::string& package, const std::string& running) {
  json out = install_state(running, {{"status", "installing"}});
  if (running != package)
    out["message"] = "Installation of " + running +
                     " is in progress in this sandbox; wait for it with "
                     "check_package_installation_status, then install " +
                     package + " (one install at a time per sandbox)";
  return out;
}

std::string upload_target(std::string_view dest_path, std::string_view file_name) {
  std::string dir(dest_path);
  const std::string_view seed = kSeedResults;
  if (dir == seed || dir.starts_with(std::string(seed) + "/"))
    dir = "/workspace" + dir.substr(seed.size());
  else if (dir.empty())
    dir = "/workspace";
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return (dir == "/" ? "" : dir) + "/" + std::string(file_name);
}

std::string instructions() {
  return "Python sandbox (sandcastle, profile seed-d): isolated Python sandboxes. Use "
         "list_sandboxes and reuse a sandbox_id if one exists, else create_sandbox; "
         "install_package_in_sandbox (answers within 5 s, then check "
         "check_package_installation_status); execute_python_code runs code (variables persist "
         "between calls) and returns stdout, stderr, exit_code and links to the files it wrote "
         "(save figures with plt.savefig(), not plt.show()); execute_terminal_command runs a "
         "shell command; upload_file_to_sandbox copies a file from the server's allowed "
         "directories.";
}

void register_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  const json string_t{{"type", "string"}};
  tools.add(
      {"list_sandboxes", "List sandboxes",
       "Lists all existing Python sandboxes and their status. Each item also includes "
       "installed Python packages.",
       object_schema(json::object(), {}),
       object_schema({{"result", {{"type", "array"}}}}, {"result"}), read_only_hints(), nullptr},
      [&env](const json&, RequestContext& c) { return list(env, c); });
  tools.add({"create_sandbox", "Create sandbox",
             "Creates a new Python sandbox and returns its ID for subsequent operations. Optional "
             "parameter: name (string) - Custom name for the sandbox",
             object_schema({{"name", string_arg("Custom name for the sandbox")}}, {}),
             object_schema({{"sandbox_id", string_t},
                            {"user_id", string_t},
                            {"name", string_t},
                            {"status", string_t}},
                           {"sandbox_id", "user_id", "name", "status"}),
             hints(false, false, false), nullptr},
            [&env](const json& a, RequestContext& c) { return create(env, a, c); });
  const json package_schema = object_schema(
      {{"sandbox_id", sandbox_id_arg()}, {"package_name", string_arg("Name of the package")}},
      {"sandbox_id", "package_name"});
  const json package_out = object_schema({{"status", string_t},
                                          {"message", string_t},
                                          {"complete", {{"type", "boolean"}}},
                                          {"success", {{"type", {"boolean", "null"}}}}},
                                         {"status", "message"});
  tools.add({"install_package_in_sandbox", "Install package",
             "Installs a Python package in the specified sandbox. Parameters: sandbox_id "
             "(string), package_name (string). Answers within 5 s: success, failed (with the "
             "installer's error), or installing (then use check_package_installation_status).",
             package_schema, package_out, hints(false, false, true, true), nullptr},
            [&env](const json& a, RequestContext& c) { return install(env, a, c); });
  tools.add({"check_package_installation_status", "Package status",
             "Checks the installation status of a package in a sandbox: success, failed, "
             "installing or not_found. Parameters: sandbox_id (string), package_name (string)",
             package_schema, package_out, read_only_hints(), nullptr},
            [&env](const json& a, RequestContext& c) { return check(env, a, c); });
  tools.add({"execute_python_code", "Execute Python code",
             "Executes Python code in a sandbox and returns results with links to generated files. "
             "Parameters: sandbox_id (string) - The sandbox ID to use, code (string) - The Python "
             "code to execute. Variables persist between calls; save figures and data to files "
             "(plt.savefig, df.to_csv) to get links.",
             object_schema({{"sandbox_id", sandbox_id_arg()}, {"code", string_arg("Python code")}},
                           {"sandbox_id", "code"}),
             object_schema({{"stdout", string_t},
                            {"stderr", string_t},
                            {"exit_code", {{"type", "integer"}}},
                            {"files", {{"type", "array"}}},
                            {"file_links", {{"type", "array"}}}},
                           {"stdout", "stderr", "exit_code", "files", "file_links"}),
             hints(false, false, false), nullptr},
            [&env](const json& a, RequestContext& c) { return execute_python(env, a, c); });
  tools.add(
      {"execute_terminal_command", "Execute terminal command",
       "Executes a terminal command in the specified sandbox. Parameters: sandbox_id (string), "
       "command (string). Returns stdout, stderr, exit_code.",
       object_schema({{"sandbox_id", sandbox_id_arg()}, {"command", string_arg("Shell command")}},
                     {"sandbox_id", "command"}),
       object_schema(
           {{"stdout", string_t}, {"stderr", string_t}, {"exit_code", {{"type", "integer"}}}},
           {"stdout", "stderr", "exit_code"}),
       hints(false, true, false), nullptr},
      [&env](const json& a, RequestContext& c) { return execute_terminal(env, a, c); });
  auto host = std::make_shared<HostPaths>(env.config.allowed_host_paths);
  std::string allowed = host->allowed().empty() ? "none (the operator enables them with "
                                                  "--allow-host-path DIR)"
                                                : "";
  for (const auto& d : host->allowed()) allowed += (allowed.empty() ? "" : ", ") + d;
  tools.add(
      {"upload_file_to_sandbox", "Upload file",
       "Uploads a file from the server's machine to the specified sandbox. Parameters: "
       "sandbox_id (string), local_file_path (string) - full path of the file, only below the "
       "directories the operator allowed (now: " +
           allowed +
           "), dest_path (string, optional, default: /app/results, which is /workspace here) - "
           "the target folder in the sandbox; the file keeps its name.",
       object_schema({{"sandbox_id", sandbox_id_arg()},
                      {"local_file_path", string_arg("Full path of the file to upload")},
                      {"dest_path",
                       {{"type", "string"},
                        {"default", kSeedResults},
                        {"description", "Target folder in the sandbox"}}}},
                     {"sandbox_id", "local_file_path"}),
       object_schema({{"success", {{"type", "boolean"}}},
                      {"error", {{"type", "boolean"}}},
                      {"message", string_t},
                      {"path", string_t}},
                     {"message"}),
       hints(false, true, true, true), nullptr},
      [&env, host](const json& a, RequestContext& c) { return upload(env, *host, a, c); });
  // file_links without the HTTP transport are sandbox:// URIs: readable here.
  register_resource_methods(server, env);
}

}  // namespace sandcastle::tools::seed_d
