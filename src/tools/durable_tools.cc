// pause_sandbox, resume_sandbox, fork_sandbox (issue 16): the MCP face of
// service/durable.h (SandboxManager's persistent half, sandbox_durable.cc).
#include "service/durable.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

using Op = Result<json> (*)(Env&, const Caller&, const json&);

// A durable operation as a tool handler.
mcp::ToolHandler handler(ToolEnv& env, Op op) {
  return service_handler(
      [&env, op](const Caller& c, const json& args) { return op(env, c, args); });
}

}  // namespace

void register_durable_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  tools.add(
      {"pause_sandbox", "Pause sandbox",
       "Pauses a sandbox until resume_sandbox. mode \"freeze\" stops its processes where they "
       "stand and keeps them in memory (resume is instant and everything, a Python kernel's "
       "variables included, is still there; a server restart loses the processes). mode \"stop\" "
       "(persistent sandboxes) ends the processes and keeps the files on disk, holding no memory: "
       "the result says whether the memory state could be saved. \"auto\" (default): stop for a "
       "persistent sandbox, freeze for another. Calls to a paused sandbox are refused until "
       "resumed.",
       pause_input_schema(), pause_output_schema(), hints(false, false, true), nullptr},
      handler(env, &pause_sandbox));

  tools.add(
      {"resume_sandbox", "Resume sandbox",
       "Resumes a paused sandbox (or starts a stopped persistent one). A frozen sandbox goes on "
       "where it stood; one paused to disk starts its processes again with its files and "
       "packages, and its next run reports state_lost. Returns the sandbox as list_sandboxes "
       "shows it, with state_lost.",
       resume_input_schema(), resume_output_schema(), hints(false, false, true), nullptr},
      handler(env, &resume_sandbox));

  tools.add({"fork_sandbox", "Fork sandbox",
             "Creates a new sandbox with a copy of another's files (copy-on-write where the disk "
             "allows), its spec, language and installed packages; the original keeps running. The "
             "fork's processes start fresh (variables are not copied). Returns the new sandbox.",
             fork_input_schema(), fork_output_schema(), hints(false, false, false), nullptr},
            handler(env, &fork_sandbox));
}

}  // namespace sandcastle::tools
