// What every sandbox tool shares: the sandbox manager and the operator's
// configuration (defaults, pass-through env, host directories allowed for
// upload/download).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/byte_budget.h"
#include "mcp/server.h"
#include "sandbox/spec.h"
#include "service/run_registry.h"
#include "service/sandbox_manager.h"

namespace sandcastle::images {
class ImageStore;
}

namespace sandcastle::service {
struct Language;
}

// The MCP face calls the service layer by its plain names.
namespace sandcastle::tools {
using namespace sandcastle::service;  // NOLINT(google-build-using-namespace)
}  // namespace sandcastle::tools

namespace sandcastle::tools {

struct ToolConfig {
  std::string default_language = "python";
  std::string default_image = "host";
  // Per-language default images (--python-image, --js-image): "python" ->
  // image. A create without an image of its own takes its language's.
  std::map<std::string, std::string> language_images;
  // Copied into every sandbox's environment (--pass-through-env), values
  // resolved from the server's environment at start.
  std::map<std::string, std::string> pass_through_env;
  // Host directories upload_file/download_file may touch (--allow-host-path).
  std::vector<std::string> allowed_host_paths;
  sandbox::Limits default_limits{};
  std::uint64_t max_file_bytes = 32 * sandbox::kMiB;  // read_file/write_file/upload/download
  // save_sandbox: the largest layer (--max-image-bytes), and where its tar
  // waits for the store (the state dir; empty: $TMPDIR or /tmp).
  std::uint64_t max_image_bytes = 8ull << 30;
  std::string save_tmp_dir;
  // Memory for file data above 1 MiB held at once, server-wide, copies
  // included (service/file_transfer.h): one max_file_bytes read over MCP
  // (8 copies) fits.
  std::shared_ptr<ByteBudget> transfer_budget = std::make_shared<ByteBudget>(256 * sandbox::kMiB);
  std::uint64_t max_output_bytes = 1 * sandbox::kMiB;  // per stream, head and tail kept
  size_t max_listed_files = 10'000;
  // Package indexes (--pip-index-url, --npm-registry): the only hosts the
  // installer's egress proxy lets it reach.
  std::string pip_index_url = "https://pypi.org/simple";
  std::string npm_registry = "https://registry.npmjs.org";
  // Set when a transport can serve sandbox files over HTTP: returns a
  // download URL for (the sandbox's owner, sandbox_id, path relative to the
  // workdir).
  std::function<std::string(const std::string& owner, const std::string& sandbox_id,
                            const std::string& path)>
      file_link;
  // The MCP App view of a run (web/run_result.html): offered as the resource
  // kRunResultViewUri and named by execute_code's _meta.ui.resourceUri.
  // Empty: no view (clients without MCP Apps lose nothing either way).
  std::string run_result_view_html;
  std::vector<std::string> pip_hosts() const;
  std::vector<std::string> npm_hosts() const;
};

// Where installed packages live inside a sandbox, and the environment every
// command there gets so it finds them.
inline constexpr const char* kPythonPackages = "/workspace/.sandcastle/python";
inline constexpr const char* kNodePackages = "/workspace/.sandcastle/node";
inline const std::map<std::string, std::string>& package_env() {
  static const std::map<std::string, std::string> kEnv = {
      {"PYTHONPATH", kPythonPackages}, {"NODE_PATH", std::string(kNodePackages) + "/node_modules"}};
  return kEnv;
}

inline constexpr const char* kRunResultViewUri = "ui://sandcastle/run-result";
inline constexpr const char* kMcpAppMime = "text/html;profile=mcp-app";

struct ToolEnv {
  SandboxManager& manager;
  ToolConfig config;
  // The image store (images/image_store.h); null: only image "host".
  images::ImageStore* images = nullptr;
  // Where runs are recorded (the manager's store); null: not recorded.
  store::SandboxStore* store = nullptr;
  // The runs in progress, for interrupt (service/run_registry.h).
  std::shared_ptr<RunRegistry> runs = std::make_shared<RunRegistry>();
};

// Registers create_sandbox, list_sandboxes, get_sandbox_status, close_sandbox.
void register_lifecycle_tools(mcp::Server& server, ToolEnv& env);
// Registers execute_code, execute_command and restart_kernel.
void register_exec_tools(mcp::Server& server, ToolEnv& env);
// Starts a python/javascript sandbox's kernel in the background (no-op for
// other languages), so the first execute_code finds it warm.
void start_kernel_async(const std::shared_ptr<SandboxEntry>& entry);
// Registers resources/read and resources/templates/list for sandbox:// URIs.
void register_resource_methods(mcp::Server& server, ToolEnv& env);
// Registers list_files, read_file, write_file, upload_file, download_file.
void register_file_tools(mcp::Server& server, ToolEnv& env);
// Registers install_packages and check_package_installation_status.
void register_package_tools(mcp::Server& server, ToolEnv& env);
// Registers list_images (image_tools.cc).
void register_image_tools(mcp::Server& server, ToolEnv& env);
// Registers save_sandbox (save_tools.cc).
void register_save_tools(mcp::Server& server, ToolEnv& env);

// The language `name` as a sandbox on `image` runs it: for "host", one whose
// toolchain the host has (find_language); for a store image, one the image
// has, else kInvalidArgument ("image X has no python3: pick an image with
// python, or image 'host'"). A missing image is kNotFound.
Result<const Language*> language_for_image(const ToolEnv& env, std::string_view name,
                                           const std::string& image);
// The canonical name of a language or alias ("py" -> "python"), whether or
// not the host has it; unknown names are returned as they are.
std::string canonical_language(std::string_view name);
// The image a create of `language` gets when it names none.
std::string default_image_for(const ToolConfig& config, const std::string& language);
// Registers pause_sandbox, resume_sandbox and fork_sandbox (durable_tools.cc).
void register_durable_tools(mcp::Server& server, ToolEnv& env);
// A sandbox as the lifecycle tools show it (lifecycle_tools.cc).
mcp::json sandbox_json(const SandboxEntry& e);
// A persistent sandbox that is not running (paused or stopped), as
// list_sandboxes shows it (lifecycle_tools.cc).
mcp::json dormant_json(const store::SandboxRecord& r, const store::SandboxStore& store);
// Registers export_dockerfile.
void register_export_tools(mcp::Server& server, ToolEnv& env);
// Registers get_sandbox_history (history_tools.cc).
void register_history_tools(mcp::Server& server, ToolEnv& env);
// Appends one execute_code / execute_command call to the run history
// (history_tools.cc): what ran, its capped output and how it ended. Calls
// that ran nothing (unknown sandbox, bad arguments) are not recorded.
void record_run(ToolEnv& env, const mcp::RequestContext& ctx, const char* tool,
                const mcp::json& args, const mcp::ToolResult& res,
                std::chrono::steady_clock::time_point started);

inline void register_sandbox_tools(mcp::Server& server, ToolEnv& env) {
  register_lifecycle_tools(server, env);
  register_durable_tools(server, env);
  register_exec_tools(server, env);
  register_file_tools(server, env);
  register_package_tools(server, env);
  register_image_tools(server, env);
  register_save_tools(server, env);
  register_export_tools(server, env);
  register_history_tools(server, env);
  register_resource_methods(server, env);
}

// The owner of the sandboxes a request may see ("" for the local stdio user).
std::string owner_of(const mcp::RequestContext& ctx);

// An isError result for an engine or manager error: what went wrong, plus the
// error code name so agents can branch on it.
mcp::ToolResult error_result(const Error& err);

std::string iso_time(std::chrono::system_clock::time_point t);

}  // namespace sandcastle::tools
