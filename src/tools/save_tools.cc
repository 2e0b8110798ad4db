// save_sandbox: the MCP face of service/save.h.
#include "service/save.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

void register_save_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add({"save_sandbox", "Save sandbox as image",
                      "Saves what a sandbox changed as a new image: its image's layers plus "
                      "one layer with its "
                      "writes to / and its /workspace (files, installed pip/npm packages). "
                      "create_sandbox "
                      "{image: name} then starts from it. Processes keep running. A sandbox "
                      "on image 'host' "
                      "saves only /workspace, onto a store image given as base.",
                      save_input_schema(), save_output_schema(),
                      json{{"readOnlyHint", false},
                           {"destructiveHint", false},
                           {"idempotentHint", false},
                           {"openWorldHint", false}},
                      nullptr},
                     [&env](const json& args, RequestContext& ctx) {
                       auto r = save_sandbox(env, Caller{owner_of(ctx), {}}, args);
                       if (!r.ok()) return error_result(r.error());
                       return ToolResult::from_structured(std::move(*r));
                     });
}

}  // namespace sandcastle::tools
