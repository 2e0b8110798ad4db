// create_sandbox, list_sandboxes, get_sandbox_status, close_sandbox.
#include "service/images.h"
#include "service/languages.h"
#include "service/lifecycle.h"
#include "service/network.h"
#include "service/run_env.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

std::string owner_of(const RequestContext& ctx) {
  return ctx.owner();
}

ToolResult error_result(const Error& err) {
  // No structuredContent: clients check it against the tool's outputSchema
  // even on errors, and an error has none of the output's fields.
  return ToolResult::error(err.message() + " [" + error_code_name(err.code) + "]");
}

void register_lifecycle_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  std::string langs;
  for (const auto& n : available_language_names()) langs += (langs.empty() ? "" : ", ") + n;

  tools.add(
      {"create_sandbox", "Create sandbox",
       "Creates an isolated Linux sandbox and returns its sandbox_id. Pass the id to "
       "execute_code, execute_command and the file tools; state (files, installed packages, "
       "interpreter variables) persists between calls until close_sandbox or until it is idle "
       "for ttl_s seconds. Code inside has no network unless network.mode allows some, runs as an "
       "unprivileged user, and is "
       "limited in memory, CPU, processes and disk. Languages: " +
           langs + ".",
       create_input_schema(env.config), sandbox_output_schema(), hints(false, false, false),
       nullptr},
      service_handler(
          [&env](const Caller& c, const json& args) { return create_sandbox(env, c, args); }));

  tools.add(
      {"list_sandboxes", "List sandboxes",
       "Lists your live sandboxes with their status, limits, last use and installed packages. "
       "Reuse an existing sandbox_id instead of creating a new sandbox when one fits.",
       json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"sandboxes", {{"type", "array"}}}, {"count", {{"type", "integer"}}}}},
            {"required", {"sandboxes", "count"}}},
       read_only_hints(), nullptr},
      [&env](const json&, RequestContext& ctx) {
        return ToolResult::from_structured(list_sandboxes(env, Caller{owner_of(ctx), {}}));
      });

  tools.add(
      {"get_sandbox_status", "Sandbox status",
       "Reports one sandbox's state and current resource use (memory, CPU time, disk, "
       "processes). Without sandbox_id, summarises all your sandboxes.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
            {"additionalProperties", false}},
       json{{"type", "object"}}, read_only_hints(), nullptr},
      [&env](const json& args, RequestContext& ctx) {
        if (!args.contains("sandbox_id")) {
          auto all = env.manager.list(owner_of(ctx));
          json ids = json::array();
          for (const auto& e : all) ids.push_back(e->id());
          return ToolResult::from_structured(
              json{{"active_sandboxes", all.size()},
                   {"sandbox_ids", ids},
                   {"server_live_sandboxes", env.manager.live_count()},
                   {"server_max_sandboxes", env.manager.options().max_sandboxes}});
        }
        // A paused or stopped sandbox is reported, not started.
        if (auto j = find_listing(env, args["sandbox_id"], owner_of(ctx));
            j && (*j)["status"] != "running")
          return ToolResult::from_structured(*j);
        auto entry = env.manager.get(args["sandbox_id"], owner_of(ctx));
        if (!entry.ok()) return error_result(entry.error());
        EntryUse use(*entry);
        json out = sandbox_json(*use);
        auto usage = use->sandbox().usage();
        if (usage.ok()) {
          out["usage"] = {{"memory_bytes", usage->memory_bytes},
                          {"peak_memory_bytes", usage->peak_memory_bytes},
                          {"cpu_time_ms", static_cast<double>(usage->cpu_time.count()) / 1000.0},
                          {"processes", usage->processes},
                          {"disk_bytes", usage->disk_bytes},
                          {"accounting", usage->accounting}};
        } else {
          out["usage_error"] = usage.error().message();
        }
        if (auto net = network_status_json(*use); !net.is_null()) out["network"].update(net);
        return ToolResult::from_structured(out);
      });

  tools.add(
      {"set_sandbox_network", "Change sandbox network rules",
       "Replaces the allow and/or deny rules of a sandbox created with network.mode "
       "\"allowlist\" (rule syntax as in create_sandbox). Takes effect for the next connection; "
       "open connections the new rules refuse are closed (closed_connections). The mode itself "
       "is fixed at creation. get_sandbox_status shows the rules, counters and last refusals.",
       set_network_input_schema(),
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}},
              {"network", {{"type", "object"}}},
              {"closed_connections", {{"type", "integer"}}}}},
            {"required", {"sandbox_id", "network", "closed_connections"}}},
       hints(false, false, true), nullptr},
      service_handler(
          [&env](const Caller& c, const json& args) { return set_sandbox_network(env, c, args); }));

  tools.add(
      {"close_sandbox", "Close sandbox",
       "Destroys a sandbox: kills its processes and deletes its files (a persistent or paused "
       "sandbox's too). An unknown id is an error.",
       sandbox_id_schema(),
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}}, {"closed", {{"type", "boolean"}}}}},
            {"required", {"sandbox_id", "closed"}}},
       hints(false, true, false), nullptr},
      service_handler([&env](const Caller& c, const json& args) {
        return close_sandbox(env, c, args["sandbox_id"]);
      }));
}

}  // namespace sandcastle::tools
