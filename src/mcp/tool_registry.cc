#include "mcp/tool_registry.h"

#include <spdlog/spdlog.h>

#include <regex>
#include <stdexcept>

#include "mcp/json_schema.h"
#include "mcp/pagination.h"
#include "mcp/param_headers.h"

namespace sandcastle::mcp {

ToolResult ToolResult::from_structured(json data) {
  ToolResult r;
  r.content.push_back({{"type", "text"}, {"text", dump_message(data)}});
  r.structured = std::move(data);
  return r;
}

ToolResult ToolResult::error(const std::string& text, json structured) {
  ToolResult r;
  r.content.push_back({{"type", "text"}, {"text", text}});
  r.structured = std::move(structured);
  r.is_error = true;
  return r;
}

ToolResult ToolResult::text(const std::string& text) {
  ToolResult r;
  r.content.push_back({{"type", "text"}, {"text", text}});
  return r;
}

json ToolResult::to_json() const {
  json out{{"content", content}};
  if (!structured.is_null()) out["structuredContent"] = structured;
  if (is_error) out["isError"] = true;
  return out;
}

void ToolRegistry::add(ToolDefinition def, ToolHandler handler) {
  // 2025-11-25: 1-128 characters of [A-Za-z0-9_.-].
  static const std::regex kName("^[A-Za-z0-9_.-]{1,128}$");
  if (!std::regex_match(def.name, kName))
    throw std::invalid_argument("invalid tool name: " + def.name);
  if (tools_.count(def.name)) throw std::invalid_argument("duplicate tool: " + def.name);
  // Routing parameters are marked here, once for every tool (SEP-2243).
  mark_routing_params(def.input_schema);
  if (auto marks = param_headers_of(def.input_schema); !marks.ok())
    throw std::invalid_argument("tool " + def.name + ": " + marks.error().context);
  json listed{{"name", def.name}, {"description", def.description},
              {"inputSchema", def.input_schema}};
  if (!def.title.empty()) listed["title"] = def.title;
  if (!def.output_schema.is_null()) listed["outputSchema"] = def.output_schema;
  if (!def.annotations.is_null()) listed["annotations"] = def.annotations;
  if (!def.meta.is_null()) listed["_meta"] = def.meta;
  order_.push_back(def.name);
  std::string name = def.name;
  tools_.emplace(name, Entry{std::move(def), std::move(handler), std::move(listed)});
}

const ToolDefinition* ToolRegistry::find(const std::string& name) const {
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : &it->second.def;
}

json ToolRegistry::list_page(const std::optional<std::string>& cursor) const {
  size_t offset = 0;
  if (cursor) {
    auto decoded = decode_cursor("tools", *cursor);
    if (!decoded || *decoded > order_.size())
      throw RpcError{rpc_error::kInvalidParams, "Invalid cursor: pass back a nextCursor value exactly as received", nullptr};
    offset = *decoded;
  }
  json tools = json::array();
  size_t end = std::min(order_.size(), offset + page_size_);
  for (size_t i = offset; i < end; ++i) tools.push_back(tools_.at(order_[i]).listed);
  json result{{"tools", std::move(tools)}};
  if (end < order_.size()) result["nextCursor"] = encode_cursor("tools", end);
  return result;
}

void ToolRegistry::set_runs_inline(const std::string& name) { tools_.at(name).def.runs_inline = true; }

ToolResult ToolRegistry::call(const std::string& name, const json& args,
                              RequestContext& ctx) const {
  auto it = tools_.find(name);
  if (it == tools_.end()) {
    std::string known;
    for (const auto& n : order_) known += (known.empty() ? "" : ", ") + n;
    throw RpcError{rpc_error::kInvalidParams, "Unknown tool '" + name + "'. Available tools: " + known,
                   nullptr};
  }
  const Entry& e = it->second;
  json effective = args.is_null() ? json::object() : args;
  if (auto bad = validate_schema(e.def.input_schema, effective)) {
    return ToolResult::error("Invalid arguments for tool '" + name + "': " + bad->message() +
                             ". Fix the argument and call the tool again.");
  }
  apply_defaults(e.def.input_schema, effective);
  try {
    ToolResult r = e.handler(effective, ctx);
    if (!r.is_error && !e.def.output_schema.is_null()) {
      if (auto bad = validate_schema(e.def.output_schema, r.structured))
        spdlog::error("tool {} returned output violating its outputSchema: {}", name, bad->message());
    }
    return r;
  } catch (const RpcError&) {
    throw;
  } catch (const std::exception& ex) {
    spdlog::error("tool {} failed: {}", name, ex.what());
    return ToolResult::error("Tool '" + name + "' failed unexpectedly: " + ex.what() +
                             ". This is a sandcastle bug; retrying may help.");
  }
}

}  // namespace sandcastle::mcp
