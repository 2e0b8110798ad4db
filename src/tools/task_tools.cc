// Which product tools may run as tasks (mcp/tasks.h): the long operations,
// whose result a client would rather poll for than hold a request open.
#include "tools/tool_env.h"

namespace sandcastle::tools {

void mark_task_tools(mcp::Server& server) {
  for (const char* name : {"execute_code", "execute_command", "install_packages", "save_sandbox"})
    if (server.tools().contains(name))
      server.tools().set_task_support(name, mcp::TaskSupport::kOptional);
}

}  // namespace sandcastle::tools
