// What the tool registrations share: a service operation's Result<json> as
// a tool result, and the annotations (MCP's behaviour hints) in their two
// shapes.
#pragma once

#include <functional>
#include <utility>

#include "mcp/server.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

// Read-only tools: {readOnlyHint: true, openWorldHint: false}.
inline mcp::json read_only_hints() {
  return mcp::json{{"readOnlyHint", true}, {"openWorldHint", false}};
}

// All four hints, for tools that change something (or say more).
inline mcp::json hints(bool read_only, bool destructive, bool idempotent, bool open_world = false) {
  return mcp::json{{"readOnlyHint", read_only},
                   {"destructiveHint", destructive},
                   {"idempotentHint", idempotent},
                   {"openWorldHint", open_world}};
}

// The structured result (mirrored as text), or the error with its code.
inline mcp::ToolResult tool_result_of(Result<mcp::json> r) {
  if (!r.ok()) return error_result(r.error());
  return mcp::ToolResult::from_structured(std::move(*r));
}

// A handler that calls `op` as the request's owner with the checked arguments.
inline mcp::ToolHandler service_handler(
    std::function<Result<mcp::json>(const Caller&, const mcp::json&)> op) {
  return [op = std::move(op)](const mcp::json& args, mcp::RequestContext& ctx) {
    return tool_result_of(op(Caller{owner_of(ctx), {}}, args));
  };
}

}  // namespace sandcastle::tools
