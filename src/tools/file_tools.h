// The file tools' handlers (file_tools.cc), for the drop-in profiles'
// adapters (tools/profiles/): each takes its tool's arguments with every
// default filled in, and returns the tool's result or its error (what to do
// about a path included).
#pragma once

#include "mcp/server.h"
#include "tools/tool_env.h"

namespace sandcastle::tools::file_ops {

// list_files {sandbox_id, path, recursive}.
mcp::ToolResult list(ToolEnv& env, const mcp::json& args, mcp::RequestContext& ctx);
// read_file {sandbox_id, path, encoding, offset[, length]}.
mcp::ToolResult read(ToolEnv& env, const mcp::json& args, mcp::RequestContext& ctx);
// write_file {sandbox_id, path, content, encoding, executable}.
mcp::ToolResult write(ToolEnv& env, const mcp::json& args, mcp::RequestContext& ctx);

}  // namespace sandcastle::tools::file_ops
