// What every sandbox tool shares: the service's environment (the sandbox
// manager, the operator's configuration), and the MCP face's registrations.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "mcp/server.h"
#include "service/env.h"
#include "service/images.h"
#include "service/run_env.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {
struct Language;
}

// The MCP face calls the service layer by its plain names.
namespace sandcastle::tools {
using namespace sandcastle::service;  // NOLINT(google-build-using-namespace)
}  // namespace sandcastle::tools

namespace sandcastle::tools {

// The service's environment (service/env.h), as the tools have always
// called it.
using ToolConfig = service::Config;
using ToolEnv = service::Env;

inline constexpr const char* kRunResultViewUri = "ui://sandcastle/run-result";
inline constexpr const char* kMcpAppMime = "text/html;profile=mcp-app";

// Registers create_sandbox, list_sandboxes, get_sandbox_status, close_sandbox.
void register_lifecycle_tools(mcp::Server& server, ToolEnv& env);
// Registers execute_code, execute_command and restart_kernel.
void register_exec_tools(mcp::Server& server, ToolEnv& env);
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

// Registers pause_sandbox, resume_sandbox and fork_sandbox (durable_tools.cc).
void register_durable_tools(mcp::Server& server, ToolEnv& env);
// Registers export_dockerfile.
void register_export_tools(mcp::Server& server, ToolEnv& env);
// export_dockerfile's call ({sandbox_id}), for the profiles that reshape it.
mcp::ToolResult export_dockerfile(ToolEnv& env, const mcp::json& args, mcp::RequestContext& ctx);
// Registers get_sandbox_history (history_tools.cc).
void register_history_tools(mcp::Server& server, ToolEnv& env);
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

}  // namespace sandcastle::tools
