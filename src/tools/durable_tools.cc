// pause_sandbox, resume_sandbox, fork_sandbox (issue 16): the MCP face of
// SandboxManager's persistent half (sandbox_durable.cc).
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

json id_schema(const char* what) {
  return json{{"type", "string"}, {"description", what}};
}

std::optional<PauseMode> pause_mode(const std::string& s) {
  if (s == "auto") return PauseMode::kAuto;
  if (s == "freeze") return PauseMode::kFreeze;
  if (s == "stop") return PauseMode::kStop;
  return std::nullopt;
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
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", id_schema("Sandbox id or name.")},
              {"mode",
               {{"type", "string"}, {"enum", {"auto", "freeze", "stop"}}, {"default", "auto"}}}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}},
              {"status", {{"type", "string"}}},
              {"mode", {{"type", "string"}}},
              {"memory_saved", {{"type", "boolean"}}},
              {"note", {{"type", "string"}}}}},
            {"required", {"sandbox_id", "status", "mode", "memory_saved"}}},
       json{{"readOnlyHint", false},
            {"destructiveHint", false},
            {"idempotentHint", true},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto mode = pause_mode(args["mode"].get<std::string>());
        if (!mode) return ToolResult::error("mode: one of auto, freeze, stop");
        const std::string id = args["sandbox_id"].get<std::string>();
        auto r = env.manager.pause(id, ctx.owner(), *mode);
        if (!r.ok()) return error_result(r.error());
        return ToolResult::from_structured(json{{"sandbox_id", id},
                                                {"status", "paused"},
                                                {"mode", r->mode},
                                                {"memory_saved", r->memory_saved},
                                                {"note", r->note}});
      });

  tools.add(
      {"resume_sandbox", "Resume sandbox",
       "Resumes a paused sandbox (or starts a stopped persistent one). A frozen sandbox goes on "
       "where it stood; one paused to disk starts its processes again with its files and "
       "packages, and its next run reports state_lost. Returns the sandbox as list_sandboxes "
       "shows it, with state_lost.",
       json{{"type", "object"},
            {"properties", {{"sandbox_id", id_schema("Sandbox id or name.")}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}}, {"state_lost", {{"type", "boolean"}}}}},
            {"required", {"sandbox_id", "state_lost"}}},
       json{{"readOnlyHint", false},
            {"destructiveHint", false},
            {"idempotentHint", true},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto e = env.manager.resume(args["sandbox_id"].get<std::string>(), ctx.owner());
        if (!e.ok()) return error_result(e.error());
        json out = sandbox_json(**e);
        // Said here and kept for the next run, which reports it too.
        bool lost = (*e)->take_state_lost();
        if (lost) (*e)->set_state_lost();
        out["state_lost"] = lost;
        return ToolResult::from_structured(out);
      });

  tools.add({"fork_sandbox", "Fork sandbox",
             "Creates a new sandbox with a copy of another's files (copy-on-write where the disk "
             "allows), its spec, language and installed packages; the original keeps running. The "
             "fork's processes start fresh (variables are not copied). Returns the new sandbox.",
             json{{"type", "object"},
                  {"properties",
                   {{"sandbox_id", id_schema("Sandbox to copy: id or name.")},
                    {"name",
                     {{"type", "string"},
                      {"maxLength", 64},
                      {"description", "Name of the new sandbox."}}}}},
                  {"required", {"sandbox_id"}},
                  {"additionalProperties", false}},
             json{{"type", "object"},
                  {"properties",
                   {{"sandbox_id", {{"type", "string"}}}, {"forked_from", {{"type", "string"}}}}},
                  {"required", {"sandbox_id", "forked_from"}}},
             json{{"readOnlyHint", false},
                  {"destructiveHint", false},
                  {"idempotentHint", false},
                  {"openWorldHint", false}},
             nullptr},
            [&env](const json& args, RequestContext& ctx) {
              const std::string from = args["sandbox_id"].get<std::string>();
              auto e = env.manager.fork(from, ctx.owner(), args.value("name", std::string()));
              if (!e.ok()) return error_result(e.error());
              start_kernel_async(*e);
              json out = sandbox_json(**e);
              out["forked_from"] = from;
              return ToolResult::from_structured(out);
            });
}

}  // namespace sandcastle::tools
