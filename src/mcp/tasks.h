// Running tools/call as a task, and the tasks/* methods, in both eras:
//  - 2025-11-25 (legacy): the client asks with params.task {ttl}; the answer
//    is {task: {...}}; tasks/get, tasks/result (waits, then the tool's
//    result), tasks/list and tasks/cancel; capabilities.tasks.
//  - 2026-07-28: the extension io.modelcontextprotocol/tasks (SEP-2663),
//    declared per request in _meta clientCapabilities.extensions. The server
//    decides: a task-supporting tool always answers with a flat
//    CreateTaskResult (resultType "task"); tasks/get inlines the result,
//    error or inputRequests; tasks/update answers input requests;
//    tasks/cancel acks. tasks/list and tasks/result do not exist there.
// The task's work runs with its own CancelToken, which tasks/cancel cancels:
// the same token path as notifications/cancelled for a plain request.
#pragma once

#include <optional>

#include "mcp/jsonrpc.h"
#include "mcp/protocol.h"
#include "mcp/request_context.h"
#include "mcp/task_store.h"
#include "mcp/tool_registry.h"

namespace sandcastle::mcp {

class Server;

// The tools/call answer when this call runs as a task (CreateTaskResult);
// nullopt: run it as a plain call. Throws RpcError -32021 (2026-07-28, a
// task-only tool and no extension), -32601 (2025-11-25, a task-only tool
// called without params.task), or InputRequired from the tool's before_task.
std::optional<json> maybe_start_task(const Server& server, const ToolDefinition& def,
                                     const json& args, const json& params, RequestContext& ctx);

// tasks/get, tasks/update, tasks/cancel, tasks/list, tasks/result.
void register_task_methods(Server& server);

// Adds what the server offers for tasks to `caps` for a client of `era`
// speaking `version` (initialize's or server/discover's capabilities).
void add_task_capabilities(json& caps, Era era, const std::string& version);

// The wire form of a task: legacy (ttl, pollInterval) or modern (ttlMs,
// pollIntervalMs), without result/error/inputRequests.
json task_json(const Task& t, Era era, int64_t poll_interval_ms);

}  // namespace sandcastle::mcp
