// Drop-in profile seed-a: the face of mcp-code-sandbox (../shared/seeds/000,
// an E2B server). Every tool takes a session_id the caller invents; here it
// is the sandbox's name (unique per owner), so the id lives as long as the
// sandbox, shows in list_sandboxes and the console, and one caller's ids
// never reach another's sandboxes.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "mcp/server.h"
#include "service/runs.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

namespace seed_a {

// create_sandbox, close_sandbox, get_sandbox_status, execute_code,
// install_package, create_run_close, list_files, read_file, write_file,
// upload_file.
void register_tools(mcp::Server& server, ToolEnv& env);
std::string instructions();

// Output as E2B's Logs list it: one entry per line, each with its newline
// (a last line without one as it is); "" is [].
mcp::json e2b_lines(std::string_view text);

// A run as the seed's execute_code returns it: {logs: {stdout: [...],
// stderr: [...]}, error: null or {name, value, traceback}}. A timeout, an
// out-of-memory kill or a dead interpreter is an error too, named for it.
mcp::json execution_json(const service::RunResult& r);

// upload_file's target: destination_path joined with file_name. The
// default "/" (the sandbox's root, which its user cannot write) is the
// working directory /workspace; a relative directory is below it. A
// file_name that is empty, absolute, or has a ".." component is refused,
// and so is a destination_path with a ".." component.
Result<std::string> upload_path(const std::string& destination_path, const std::string& file_name);

}  // namespace seed_a
}  // namespace sandcastle::tools
