// Profile seed-d: the face of python-mcp-sandbox (FastAPI, SSE at /sse +
// /messages, API keys): create_sandbox, list_sandboxes, execute_python_code,
// install_package_in_sandbox, check_package_installation_status,
// execute_terminal_command and upload_file_to_sandbox, with its argument
// names and JSON results, over sandcastle's sandboxes. Its flaws stay out:
// each request acts for its own API key's owner (never a user kept on a
// shared object), runs have timeouts, file links carry no API key, and
// local_file_path is read only below the operator's --allow-host-path.
#pragma once

#include <string>
#include <string_view>

#include "mcp/server.h"
#include "service/runs.h"
#include "tools/tool_env.h"

namespace sandcastle::tools::seed_d {

void register_tools(mcp::Server& server, ToolEnv& env);
std::string instructions();

// execute_python_code's result: {stdout, stderr, exit_code, files,
// file_links}. An exception's traceback is in stderr (as a script's would
// be); files are the paths (relative to /workspace) the run created or
// changed, file_links their HTTP links (sandbox:// URIs without HTTP).
mcp::json python_result(const service::RunResult& r);

// The seed's install status {status, message, complete, success, ...} from
// sandcastle's check_package_installation_status result for one package.
mcp::json install_state(const std::string& package, const mcp::json& status);

// install_package_in_sandbox's answer while `running` still installs in
// the sandbox: the seed's "installing" state (one install at a time per
// sandbox), saying which install to wait for when it is another package.
mcp::json busy_state(const std::string& package, const std::string& running);

// Where upload_file_to_sandbox puts `file_name` for a dest_path: the seed's
// /app/results (its default, and its working directory) is /workspace here,
// and so are paths below it; other paths are taken as they are (relative
// ones from /workspace). The file keeps its name.
std::string upload_target(std::string_view dest_path, std::string_view file_name);

}  // namespace sandcastle::tools::seed_d
