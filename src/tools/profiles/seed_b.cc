// Profile seed-b (sandbox_server): its six tools, names, arguments and
// plain-text results, as thin adapters over the service layer. A container
// is a sandbox; its id is the sandbox id.
#include "tools/profiles/seed_b.h"

#include <array>
#include <optional>
#include <vector>

#include "service/file_transfer.h"
#include "service/lifecycle.h"
#include "service/save.h"
#include "tools/adapter.h"
#include "tools/profiles/schema.h"

namespace sandcastle::tools::seed_b {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

using profiles::object_schema;
using profiles::string_arg;

constexpr const char* kWorkspace = "/workspace";

json container_id_arg() {
  return string_arg("ID of the container (from create_container_environment)");
}

std::string code_of(const Error& err) {
  return std::string(" [") + error_code_name(err.code) + "]";
}

// A failure on an existing container's id, in the seed's words plus what to do.
ToolResult container_error(const std::string& what, const std::string& id, const Error& err) {
  if (err.code == ErrorCode::kNotFound)
    return ToolResult::error("Container " + id +
                             " not found: it was removed (exit_container, or idle past its time "
                             "limit) or never existed; create one with "
                             "create_container_environment" +
                             code_of(err));
  return ToolResult::error(what + ": " + err.message() + code_of(err));
}

// The language a sandbox on `image` is made for: its interpreter's for a
// python or node image; otherwise the server's default, then a shell (a
// plain distribution image may have no interpreter at all).
std::vector<std::string> languages_for(std::string_view image, const ToolConfig& config) {
  const std::string_view repo = image.substr(image.rfind('/') + 1);
  if (repo.starts_with("python") || repo.starts_with("pypy")) return {"python"};
  if (repo.starts_with("node")) return {"javascript"};
  return {config.default_language, "bash", "sh"};
}

Result<json> create_on(ToolEnv& env, const Caller& c, json req, std::string_view image) {
  Result<json> made = Error::make(ErrorCode::kInternal, "no language");
  for (const auto& lang : languages_for(image, env.config)) {
    req["language"] = lang;
    made = create_sandbox(env, c, req);
    // "image X has no python3": try the next language; anything else stands.
    if (made.ok() || made.error().code != ErrorCode::kInvalidArgument) break;
  }
  return made;
}

ToolResult create_container(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string image = args["image"];
  const bool persist = args.value("persist", false);
  const Caller c{owner_of(ctx), {}};
  json req{{"persistent", persist}, {"image", image}};
  auto made = create_on(env, c, req, image);
  std::string note;
  const bool missing = !made.ok() && (made.error().code == ErrorCode::kNotFound ||
                                      made.error().code == ErrorCode::kFailedPrecondition);
  const bool stand_in = missing && host_stands_in_for(image);
  if (stand_in) {
    req.erase("image");  // the language's default image: the host's userland unless configured
    made = create_on(env, c, req, image);
    if (made.ok())
      note = "\nImage " + image +
             " is not in sandcastle's image store, so this container runs on "
             "image '" +
             (*made)["image"].get<std::string>() +
             "' (python3, node, gcc, bash and the usual tools). For that exact image, run "
             "`sandcastle image pull " +
             image + "` on the server and create again.";
  }
  if (!made.ok()) {
    const Error& err = made.error();
    // The image is what is missing only when no stand-in was tried; a
    // stand-in's own failure (a full server, say) is said as it is.
    if (missing && !stand_in)
      return ToolResult::error(
          "Error: Image " + image + " not found. Please verify the image name: " + err.message() +
          "; add it with `sandcastle image pull " + image + "` on the server" + code_of(err));
    return ToolResult::error("Error creating container: " + err.message() + code_of(err));
  }
  const json& s = *made;
  std::string text = "Container created with ID: " + s["sandbox_id"].get<std::string>() +
                     "\nWorking directory is /workspace\nContainer is ready for commands";
  text += note;
  if (persist)
    text +=
        "\nPersistent: its files and installed packages are kept (across server restarts "
        "too; idle, it is paused, not removed) until exit_container removes it.";
  return ToolResult::text(text);
}

ToolResult create_file(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["container_id"];
  const std::string filename = args["filename"];
  const std::string& content = args["content"].get_ref<const std::string&>();
  auto path = workspace_path(filename);
  if (!path.ok()) return ToolResult::error("Error creating file: " + path.error().context);
  if (content.size() > env.config.max_file_bytes)
    return ToolResult::error("Error creating file: content is " + std::to_string(content.size()) +
                             " bytes, more than the " + std::to_string(env.config.max_file_bytes) +
                             "-byte limit of one file; split it, or generate it with "
                             "execute_command_in_container");
  auto e = env.manager.get(id, owner_of(ctx));
  if (!e.ok()) return container_error("Error creating file", id, e.error());
  EntryUse use(*e);
  auto lease = reserve_transfer(*env.config.transfer_budget, content.size());
  if (!lease.ok()) return container_error("Error creating file", id, lease.error());
  if (auto s = use->sandbox().write_file(*path, content, 0644, /*parents=*/true); !s.ok())
    return container_error("Error creating file " + filename, id, s.error());
  return ToolResult::text("File " + filename + " has been created in /workspace");
}

ToolResult execute_command(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["container_id"];
  service::RunOptions opts;
  opts.cancel = ctx.cancel_token();
  // As the seed's exec: /workspace, and apt-get without questions.
  json req{{"sandbox_id", id},
           {"command", args["command"]},
           {"env", {{"DEBIAN_FRONTEND", "noninteractive"}}}};
  auto r = service::run_command(env, Caller{owner_of(ctx), {}}, req, opts);
  if (!r.ok()) return container_error("Error executing command", id, r.error());
  ToolResult res = ToolResult::text(command_text(*r));
  res.is_error = r->failed;
  return res;
}

ToolResult save_state(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["container_id"];
  const std::string name = args["name"];
  auto saved = save_sandbox(env, Caller{owner_of(ctx), {}}, {{"sandbox_id", id}, {"name", name}});
  if (!saved.ok()) {
    // This face has no `base`: a container to save must start from a store image.
    if (saved.error().code == ErrorCode::kFailedPrecondition)
      return ToolResult::error(
          "Error saving container: " + saved.error().message() + code_of(saved.error()) +
          ". Here: create the container from an image in sandcastle's store "
          "(create_container_environment with a name `sandcastle image list` shows), then save "
          "that one.");
    return container_error("Error saving container", id, saved.error());
  }
  std::string text = "Environment saved as image: " + name +
                     "\n\nTo use this environment later:\n1. Create a new container from it: "
                     "create_container_environment with image \"" +
                     name +
                     "\"\n2. Or generate a Dockerfile with export_dockerfile\n\nThe image "
                     "contains all installed packages and files.";
  if (!saved->value("consistent", true))
    text +=
        "\nNote: the container kept running while it was saved (no freezer on this host), "
        "so files written meanwhile may be partly saved.";
  return ToolResult::text(text);
}

ToolResult export_file(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["container_id"];
  if (auto e = env.manager.get(id, owner_of(ctx)); !e.ok())
    return container_error("Error generating Dockerfile", id, e.error());
  ToolResult got = tools::export_dockerfile(env, {{"sandbox_id", id}}, ctx);
  if (got.is_error) {
    const std::string text = got.content.empty() ? "" : got.content[0].value("text", "");
    return ToolResult::error("Error generating Dockerfile: " + text);
  }
  const json& out = got.structured;
  const json& context = out["context"];
  const std::string where = context.contains("url")
                                ? context["url"].get<std::string>()
                                : context["path"].get<std::string>() + " (in the container)";
  return ToolResult::text(
      "Here's a Dockerfile to recreate this environment:\n\n" +
      out["dockerfile"].get<std::string>() +
      "\nTo use this Dockerfile:\n1. Get its build context (the files of /workspace, and the "
      "Dockerfile at its root): " +
      where +
      "\n2. Unpack it: mkdir ctx && tar -xzf context.tar.gz -C ctx\n3. Build: docker build -t "
      "your-image-name ctx\n4. Run: docker run -it your-image-name");
}

ToolResult exit_container(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string id = args["container_id"];
  // force makes no difference: closing always stops the processes first.
  auto closed = close_sandbox(env, Caller{owner_of(ctx), {}}, id);
  if (!closed.ok()) return container_error("Error cleaning up container", id, closed.error());
  return ToolResult::text("Container " + id + " has been stopped and removed.");
}

}  // namespace

Result<std::string> workspace_path(std::string_view filename) {
  std::string_view rest = filename;
  if (rest.starts_with('/')) {
    if (rest != kWorkspace && !rest.starts_with(std::string(kWorkspace) + "/"))
      return Error::make(ErrorCode::kInvalidArgument,
                         std::string(filename) +
                             " is outside /workspace; name the file relative to /workspace "
                             "(\"app/main.py\")");
    rest.remove_prefix(std::string_view(kWorkspace).size());
  }
  std::string path = kWorkspace;
  bool named = false;
  while (!rest.empty()) {
    const size_t slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
    if (part.empty() || part == ".") continue;
    if (part == "..")
      return Error::make(ErrorCode::kInvalidArgument,
                         std::string(filename) +
                             ": '..' is not allowed; files are created inside /workspace: name "
                             "them relative to /workspace (\"app/main.py\")");
    path += "/";
    path += part;
    named = true;
  }
  if (!named)
    return Error::make(ErrorCode::kInvalidArgument,
                       "the filename names no file; give one, e.g. "
                       "\"main.py\"");
  return path;
}

bool host_stands_in_for(std::string_view image) {
  // docker.io/library/python:3.9-slim -> python
  std::string_view repo = image.substr(0, image.find_first_of(":@"));
  if (repo.starts_with("docker.io/")) repo.remove_prefix(10);
  if (repo.starts_with("library/")) repo.remove_prefix(8);
  static constexpr std::array<std::string_view, 8> kStandIns = {
      "python", "node", "debian", "ubuntu", "gcc", "buildpack-deps", "bash", "busybox"};
  for (auto s : kStandIns)
    if (repo == s) return true;
  return false;
}

std::string command_text(const service::RunResult& r) {
  std::string text = r.stdout_data + r.stderr_data;
  std::string last;
  if (r.failed || r.reason == "cancelled") {
    last = "[" + r.reason + (r.hint.empty() ? "" : ": " + r.hint) + "]";
  } else if (r.signal != 0) {
    last = "[killed by signal " + std::to_string(r.signal) + "]";
  } else if (r.exit_code != 0) {
    last = "[exit code " + std::to_string(r.exit_code) + "]";
  }
  if (r.truncated)
    last += std::string(last.empty() ? "" : " ") +
            "[output cut: the middle of a long output is left out, its head and tail kept]";
  if (last.empty()) return text;
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text + last;
}

std::string instructions() {
  return "Sandbox server (sandcastle, profile seed-b): isolated Linux containers for running "
         "code. create_container_environment(image, persist) gives a container_id; "
         "create_file_in_container writes files under /workspace; execute_command_in_container "
         "runs shell commands there (output, then the exit code when it is not 0); "
         "save_container_state saves it as an image; export_dockerfile writes a Dockerfile "
         "that rebuilds it; exit_container removes it when finished.";
}

void register_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  tools.add(
      {"create_container_environment", "Create container",
       "Create a new container with the specified base image. Returns the container ID to "
       "pass to the other tools; the working directory is /workspace. Images sandcastle's "
       "store lacks that the host can stand in for (python, node, debian, ubuntu, gcc, ...) run "
       "on the host's userland, and the result says so. persist: keep the container (files, "
       "packages) until exit_container, across server restarts.",
       object_schema({{"image", string_arg("Image to use (e.g., python:3.9-slim, ubuntu:latest)")},
                      {"persist",
                       {{"type", "boolean"},
                        {"default", false},
                        {"description", "Keep the container until exit_container"}}}},
                     {"image"}),
       nullptr, hints(false, false, false), nullptr},
      [&env](const json& a, RequestContext& c) { return create_container(env, a, c); });
  tools.add({"create_file_in_container", "Create file",
             "Create a file in the specified container, under /workspace (filename relative to it; "
             "subdirectories are made). Replaces an existing file.",
             object_schema({{"container_id", container_id_arg()},
                            {"filename", string_arg("Name of the file to create")},
                            {"content", string_arg("Content of the file")}},
                           {"container_id", "filename", "content"}),
             nullptr, hints(false, true, true), nullptr},
            [&env](const json& a, RequestContext& c) { return create_file(env, a, c); });
  tools.add(
      {"execute_command_in_container", "Execute command",
       "Execute a command in the specified container (bash -c, in /workspace) and return its "
       "output: stdout, then stderr, then the exit code when it is not 0. Commands are limited "
       "in time, memory and processes; a timeout says so.",
       object_schema(
           {{"container_id", container_id_arg()}, {"command", string_arg("Command to execute")}},
           {"container_id", "command"}),
       nullptr, hints(false, true, false), nullptr},
      [&env](const json& a, RequestContext& c) { return execute_command(env, a, c); });
  tools.add(
      {"save_container_state", "Save container as image",
       "Save the current state of a container (installed packages, files) as a new image that "
       "create_container_environment can start from.",
       object_schema({{"container_id", string_arg("ID of the container to save")},
                      {"name", string_arg("Name for the saved image (e.g., 'my-python-env:v1')")}},
                     {"container_id", "name"}),
       nullptr, hints(false, false, false), nullptr},
      [&env](const json& a, RequestContext& c) { return save_state(env, a, c); });
  tools.add(
      {"export_dockerfile", "Export Dockerfile",
       "Generate a Dockerfile that recreates the current container state: its base image, the "
       "pip and npm packages installed (pinned), the files of /workspace (in a build context "
       "archive) and its environment.",
       object_schema({{"container_id", string_arg("ID of the container to export")}},
                     {"container_id"}),
       nullptr, hints(false, false, true), nullptr},
      [&env](const json& a, RequestContext& c) { return export_file(env, a, c); });
  tools.add(
      {"exit_container", "Remove container",
       "Stop and remove a container and its files when finished.",
       object_schema(
           {{"container_id", string_arg("ID of the container to stop and remove")},
            {"force",
             {{"type", "boolean"},
              {"default", false},
              {"description", "Force remove the container even if it's running (always done)"}}}},
           {"container_id"}),
       nullptr, hints(false, true, false), nullptr},
      [&env](const json& a, RequestContext& c) { return exit_container(env, a, c); });
}

}  // namespace sandcastle::tools::seed_b
