// save_sandbox: the MCP face of service/save.h.
#include "service/save.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

void register_save_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(
      {"save_sandbox", "Save sandbox as image",
       "Saves what a sandbox changed as a new image: its image's layers plus "
       "one layer with its "
       "writes to / and its /workspace (files, installed pip/npm packages). "
       "create_sandbox "
       "{image: name} then starts from it. Processes keep running. A sandbox "
       "on image 'host' "
       "saves only /workspace, onto a store image given as base.",
       save_input_schema(), save_output_schema(), hints(false, false, false), nullptr},
      service_handler(
          [&env](const Caller& c, const json& args) { return save_sandbox(env, c, args); }));
}

}  // namespace sandcastle::tools
