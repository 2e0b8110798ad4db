// list_images: the MCP face of service/images.h.
#include "service/images.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

void register_image_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(
      {"list_images", "List images",
       "Lists the images a sandbox can start from (create_sandbox's image), with the languages "
       "each has, its unpacked size and when it was made. Image \"host\" is the host's own /usr, "
       "read-only.",
       json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"images", {{"type", "array"}}}, {"count", {{"type", "integer"}}}}},
            {"required", {"images", "count"}}},
       read_only_hints(), nullptr},
      [&env](const json&, RequestContext&) {
        auto r = list_images(env);
        if (!r.ok()) return ToolResult::error(r.error().message());
        return ToolResult::from_structured(std::move(*r));
      });
}

}  // namespace sandcastle::tools
