// get_sandbox_history, the MCP face of the run history (service/history.h):
// the service's page as structuredContent, and a line per run as text.
#include "service/history.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

std::string one_line(const std::string& s, std::size_t n) {
  std::string out;
  for (char c : s) {
    if (out.size() >= n) {
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();
      if (!out.empty() && (static_cast<unsigned char>(out.back()) & 0x80)) out.pop_back();
      return out + "…";
    }
    out.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  }
  return out;
}

ToolResult get_sandbox_history(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto page = service::sandbox_history(env, Caller{owner_of(ctx), {}}, args);
  if (!page.ok()) return error_result(page.error());
  const json& out = *page;
  const json& entries = out["entries"];
  // Appended piece by piece (GCC 12's -Wrestrict misfires on "x" + string&&).
  std::string text;
  for (const auto& e : entries) {
    const auto& lang = e["language"].get_ref<const std::string&>();
    const auto& reason = e["reason"].get_ref<const std::string&>();
    text += '#';
    text += std::to_string(e["seq"].get<std::int64_t>());
    text += ' ';
    text += e["at"].get_ref<const std::string&>();
    text += ' ';
    text += e["tool"].get_ref<const std::string&>();
    if (!lang.empty()) text.append(" (").append(lang).append(")");
    text += ": ";
    text += one_line(e["input"].get_ref<const std::string&>(), 60);
    text += " -> ";
    text += reason;
    if (reason == "exited") text.append(" ").append(std::to_string(e["exit_code"].get<int>()));
    text += '\n';
  }
  std::string head = std::to_string(entries.size());
  head.append(" run(s) of ").append(out["sandbox_id"].get_ref<const std::string&>());
  head += ", newest first";
  if (out.contains("next_before"))
    head.append(" (older ones: pass before=")
        .append(std::to_string(out["next_before"].get<std::int64_t>()))
        .append(")");
  if (!entries.empty()) head += ':';
  head += '\n';
  ToolResult res;
  res.content.push_back({{"type", "text"}, {"text", head + text}});
  res.structured = std::move(*page);
  return res;
}

}  // namespace

void register_history_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(
      {"get_sandbox_history", "Sandbox run history",
       "Lists the execute_code and execute_command calls made in one of your sandboxes, newest "
       "first: the code or command, its stdout and stderr (each cut at 64 KiB), exit code, how it "
       "ended, duration and the files it created. Also works for a sandbox that has ended, while "
       "its history is kept. Page with `before`: pass the `next_before` of the previous page.",
       service::history_input_schema(), service::history_output_schema(), hints(true, false, true),
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        return get_sandbox_history(env, args, ctx);
      });
}

}  // namespace sandcastle::tools
