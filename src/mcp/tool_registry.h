// Every tool is declared once, here: name, title, description, schemas,
// annotations and handler. The registry validates arguments before a handler
// runs and shapes results the way clients expect.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mcp/jsonrpc.h"
#include "mcp/request_context.h"

namespace sandcastle::mcp {

struct ToolResult {
  json content = json::array();
  json structured;  // null when the tool has no structured output
  bool is_error = false;

  // Structured data, mirrored as a text block (JSON) for clients that read text.
  static ToolResult from_structured(json data);
  // A failure the model can act on: what went wrong and what to do next.
  static ToolResult error(const std::string& text, json structured = nullptr);
  static ToolResult text(const std::string& text);

  json to_json() const;
};

// Whether tools/call may run the tool as a task (mcp/tasks.h), listed as
// execution.taskSupport.
enum class TaskSupport { kForbidden, kOptional, kRequired };

struct ToolDefinition {
  std::string name;
  std::string title;
  std::string description;
  json input_schema;   // a JSON Schema object
  json output_schema;  // null when the tool returns no structured content
  json annotations;    // readOnlyHint, destructiveHint, idempotentHint, openWorldHint
  // Modern era: capabilities the client must declare (-32021 otherwise).
  json required_client_capabilities;
  // Never blocks (no sandbox, no I/O, no request to the client): tools/call
  // runs it on the transport's thread, without a hand-off to a worker.
  bool runs_inline = false;
  // The tool's _meta in tools/list (MCP Apps: {"ui": {"resourceUri": ...}}); null: none.
  json meta = nullptr;
  TaskSupport task_support = TaskSupport::kForbidden;
  // Runs before a task is created, on the request's own thread: a tool that
  // gathers the client's input in multi-round-trip rounds (InputRequired)
  // and then goes on as a task. Null: none.
  std::function<void(const json& args, RequestContext& ctx)> before_task = nullptr;
};

using ToolHandler = std::function<ToolResult(const json& args, RequestContext& ctx)>;

class ToolRegistry {
 public:
  explicit ToolRegistry(size_t page_size = 100) : page_size_(page_size) {}

  // Throws std::invalid_argument for a bad name or a duplicate: a programming error.
  void add(ToolDefinition def, ToolHandler handler);

  bool contains(const std::string& name) const { return tools_.count(name) != 0; }
  const ToolDefinition* find(const std::string& name) const;
  // Marks a registered tool runs_inline (see ToolDefinition).
  void set_runs_inline(const std::string& name);
  // Lets a registered tool run as a task (and lists it so).
  void set_task_support(const std::string& name, TaskSupport support);
  size_t size() const { return order_.size(); }

  // One page of tools/list in registration order. Throws RpcError(-32602) on a bad cursor.
  json list_page(const std::optional<std::string>& cursor) const;

  // Validates `args` and runs the tool. Unknown tools throw RpcError(-32602);
  // invalid arguments and handler failures come back as isError results.
  ToolResult call(const std::string& name, const json& args, RequestContext& ctx) const;

 private:
  struct Entry {
    ToolDefinition def;
    ToolHandler handler;
    json listed;  // the tools/list form, built once
  };
  std::map<std::string, Entry> tools_;
  std::vector<std::string> order_;
  size_t page_size_;
};

}  // namespace sandcastle::mcp
