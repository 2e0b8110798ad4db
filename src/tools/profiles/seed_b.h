// Profile seed-b: the face of sandbox_server (Docker SDK, stdio, plain-text
// results): create_container_environment, create_file_in_container,
// execute_command_in_container, save_container_state, export_dockerfile and
// exit_container over sandcastle's sandboxes. Its flaws stay out: files stay
// inside /workspace, commands have limits and a timeout, and the exit code
// is reported.
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"
#include "mcp/server.h"
#include "service/runs.h"
#include "tools/tool_env.h"

namespace sandcastle::tools::seed_b {

void register_tools(mcp::Server& server, ToolEnv& env);
std::string instructions();

// create_file_in_container's filename as a path under /workspace: relative
// ("src/main.py"), or absolute below /workspace; "" components and '.' are
// dropped. kInvalidArgument for '..', an absolute path elsewhere, or no name.
Result<std::string> workspace_path(std::string_view filename);

// Whether `image` names a public language or distribution image (python:3.9-slim,
// node:20, ubuntu:latest, gcc, ...) whose tools the host userland (image
// "host") has, so a create may stand in with it when the store lacks it.
bool host_stands_in_for(std::string_view image);

// execute_command_in_container's text: stdout then stderr as the seed mixed
// them, and a last line with the exit code when it is not 0, or the reason
// and what to do when the command did not finish (timeout, out of memory).
std::string command_text(const service::RunResult& r);

}  // namespace sandcastle::tools::seed_b
