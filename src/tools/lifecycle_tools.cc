// create_sandbox, list_sandboxes, get_sandbox_status, close_sandbox.
#include <ctime>

#include "service/languages.h"
#include "service/spec_record.h"
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

std::string iso_time(std::chrono::system_clock::time_point t) {
  std::time_t tt = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return {};  // year past 9999
  return buf;
}

namespace {

json limits_json(const sandbox::Limits& l) {
  return json{{"memory_mb", l.memory_bytes / sandbox::kMiB},
              {"cpus", l.cpu_millis / 1000.0},
              {"pids", l.pids},
              {"disk_mb", l.disk_bytes / sandbox::kMiB},
              {"timeout_s", static_cast<double>(l.exec_timeout.count()) / 1000.0}};
}

json limits_schema() {
  return json{{"type", "object"},
              {"description", "Resource limits; omitted fields keep the server defaults."},
              {"properties",
               {{"memory_mb",
                 {{"type", "integer"},
                  {"minimum", 16},
                  {"maximum", 65536},
                  {"description", "Memory limit in MiB (default 512)."}}},
                {"cpus",
                 {{"type", "number"},
                  {"minimum", 0.05},
                  {"maximum", 64},
                  {"description", "CPU quota in cores (default 1)."}}},
                {"pids",
                 {{"type", "integer"},
                  {"minimum", 8},
                  {"maximum", 32768},
                  {"description", "Maximum number of processes (default 256)."}}},
                {"disk_mb",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", 65536},
                  {"description", "Size of the writable /workspace in MiB (default 256)."}}},
                {"timeout_s",
                 {{"type", "number"},
                  {"minimum", 0.1},
                  {"maximum", 3600},
                  {"description", "Default per-command timeout in seconds (default 30)."}}}}},
              {"additionalProperties", false}};
}

}  // namespace

json sandbox_json(const SandboxEntry& e) {
  json packages = json::array();
  for (const auto& p : e.packages())
    packages.push_back({{"name", p.name},
                        {"manager", p.manager},
                        {"status", package_state_name(p.state)},
                        {"version", p.version}});
  json out{{"sandbox_id", e.id()},
           {"name", e.name()},
           {"language", e.language()},
           {"image", e.spec().image()},
           {"status", e.frozen() ? "paused" : "running"},
           {"persistent", e.persistent()},
           {"limits", limits_json(e.spec().limits())},
           {"created_at", iso_time(e.created_at())},
           {"last_used", iso_time(e.last_used())},
           {"ttl_s", e.ttl().count()},
           {"ttl_action", e.ttl_action()},
           {"packages", packages}};
  if (auto engine = e.location(); !engine.empty()) out["engine"] = engine;
  return out;
}

json dormant_json(const store::SandboxRecord& r, const store::SandboxStore& store) {
  json packages = json::array();
  for (const auto& p : store.packages(r.id))
    packages.push_back(
        {{"name", p.name}, {"manager", p.manager}, {"status", p.state}, {"version", p.version}});
  json out{{"sandbox_id", r.id},
           {"name", r.name},
           {"language", r.language},
           {"image", r.image},
           {"status", store::sandbox_status_name(r.status)},
           {"persistent", true},
           {"memory_saved", r.memory_saved},
           {"created_at", iso_time(r.created_at)},
           {"last_used", iso_time(r.last_used_at)},
           {"ttl_s", r.ttl.count()},
           {"ttl_action", r.ttl_action},
           {"packages", packages}};
  if (auto o = spec_from_json(r.spec_json); o.ok()) out["limits"] = limits_json(o->limits);
  out["note"] =
      r.status == store::SandboxStatus::kPaused
          ? "paused: resume_sandbox starts it again"
          : "stopped when its server ended: the next call to it starts it again, with its "
            "files and packages (variables and processes from before are gone)";
  return out;
}

// The caller's sandbox as list_sandboxes shows it, live or dormant, without
// starting a stopped one.
std::optional<json> find_listing(ToolEnv& env, const std::string& id_or_name,
                                 const std::string& owner) {
  auto [live, dormant] = env.manager.find_any(id_or_name, owner);
  if (live) return sandbox_json(*live);
  if (dormant) return dormant_json(*dormant, env.manager.store());
  return std::nullopt;
}

namespace {

sandbox::Limits apply_limits(sandbox::Limits l, const json& in) {
  if (!in.is_object()) return l;
  if (in.contains("memory_mb"))
    l.memory_bytes = in["memory_mb"].get<std::uint64_t>() * sandbox::kMiB;
  if (in.contains("cpus"))
    l.cpu_millis = static_cast<std::uint32_t>(in["cpus"].get<double>() * 1000);
  if (in.contains("pids")) l.pids = in["pids"].get<std::uint32_t>();
  if (in.contains("disk_mb")) l.disk_bytes = in["disk_mb"].get<std::uint64_t>() * sandbox::kMiB;
  if (in.contains("timeout_s"))
    l.exec_timeout =
        std::chrono::milliseconds(static_cast<int64_t>(in["timeout_s"].get<double>() * 1000));
  return l;
}

json sandbox_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}}},
                {"name", {{"type", "string"}}},
                {"language", {{"type", "string"}}},
                {"image", {{"type", "string"}}},
                {"limits", {{"type", "object"}}},
                {"created_at", {{"type", "string"}}}}},
              {"required", {"sandbox_id", "name", "language", "image", "limits", "created_at"}}};
}

}  // namespace

void register_lifecycle_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  std::string langs;
  for (const auto& n : available_language_names()) langs += (langs.empty() ? "" : ", ") + n;

  // The default is the server's image, unless languages have images of
  // their own (--python-image, --js-image): then it follows the language.
  json image_schema{
      {"type", "string"},
      {"description",
       "The sandbox's root filesystem: an image from list_images (its files, languages, env, "
       "working dir and user; writes stay in the sandbox and count against disk_mb), or "
       "\"host\" = the host's own /usr read-only."}};
  if (env.config.language_images.empty()) image_schema["default"] = env.config.default_image;
  tools.add(
      {"create_sandbox", "Create sandbox",
       "Creates an isolated Linux sandbox and returns its sandbox_id. Pass the id to "
       "execute_code, execute_command and the file tools; state (files, installed packages, "
       "interpreter variables) persists between calls until close_sandbox or until it is idle "
       "for ttl_s seconds. Code inside has no network, runs as an unprivileged user, and is "
       "limited in memory, CPU, processes and disk. Languages: " +
           langs + ".",
       json{{"type", "object"},
            {"properties",
             {{"language",
               {{"type", "string"},
                {"default", env.config.default_language},
                {"description", "Default language for execute_code in this sandbox."}}},
              {"image", image_schema},
              {"name",
               {{"type", "string"},
                {"maxLength", 64},
                {"description", "Optional name; usable wherever a sandbox_id is."}}},
              {"persistent",
               {{"type", "boolean"},
                {"default", false},
                {"description",
                 "Keep the sandbox's files on disk: it survives a server "
                 "restart or crash (its processes start again on the next "
                 "call, which reports state_lost), and pause_sandbox can "
                 "stop it without holding memory. Needs an API key over HTTP."}}},
              {"ttl_action",
               {{"type", "string"},
                {"enum", {"destroy", "pause"}},
                {"description",
                 "What happens when the sandbox is idle for ttl_s: destroy "
                 "it, or pause it (see pause_sandbox). Default: pause for a "
                 "persistent sandbox (its files are what it is for), "
                 "destroy otherwise."}}},
              {"env",
               {{"type", "object"},
                {"additionalProperties", {{"type", "string"}}},
                {"description", "Environment variables for every command in this sandbox."}}},
              {"limits", limits_schema()},
              {"ttl_s",
               {{"type", "integer"},
                {"minimum", 10},
                {"maximum", 7 * 24 * 3600},
                {"description", "Idle seconds before the ttl_action (default 1800)."}}}}},
            {"additionalProperties", false}},
       sandbox_output_schema(),
       json{{"readOnlyHint", false},
            {"destructiveHint", false},
            {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        const std::string lang_arg = args["language"].get<std::string>();
        const std::string image = args.contains("image") ? args["image"].get<std::string>()
                                                         : default_image_for(env.config, lang_arg);
        auto lang = language_for_image(env, lang_arg, image);
        if (!lang.ok()) return error_result(lang.error());
        CreateRequest req;
        req.language = (*lang)->name;
        req.name = args.value("name", std::string());
        req.owner = owner_of(ctx);
        if (args.contains("ttl_s")) req.ttl = std::chrono::seconds(args["ttl_s"].get<int64_t>());
        req.spec.image = image;
        req.spec.limits =
            apply_limits(env.config.default_limits, args.value("limits", json::object()));
        req.spec.env = env.config.pass_through_env;
        if (args.contains("env"))
          for (const auto& [k, v] : args["env"].items()) req.spec.env[k] = v.get<std::string>();
        if (args["persistent"].get<bool>())
          req.spec.persistence = sandbox::Persistence::kPersistent;
        req.ttl_action =
            args.contains("ttl_action")
                ? args["ttl_action"].get<std::string>()
                : (req.spec.persistence == sandbox::Persistence::kPersistent ? "pause" : "destroy");
        auto entry = env.manager.create(req);
        if (!entry.ok()) return error_result(entry.error());
        start_kernel_async(*entry);  // python/javascript: the interpreter warms up meanwhile
        return ToolResult::from_structured(sandbox_json(**entry));
      });

  tools.add(
      {"list_sandboxes", "List sandboxes",
       "Lists your live sandboxes with their status, limits, last use and installed packages. "
       "Reuse an existing sandbox_id instead of creating a new sandbox when one fits.",
       json{{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"sandboxes", {{"type", "array"}}}, {"count", {{"type", "integer"}}}}},
            {"required", {"sandboxes", "count"}}},
       json{{"readOnlyHint", true}, {"openWorldHint", false}}, nullptr},
      [&env](const json&, RequestContext& ctx) {
        json list = json::array();
        for (const auto& l : env.manager.list_all(owner_of(ctx)))
          list.push_back(l.live ? sandbox_json(*l.live)
                                : dormant_json(*l.dormant, env.manager.store()));
        size_t n = list.size();
        return ToolResult::from_structured(json{{"sandboxes", std::move(list)}, {"count", n}});
      });

  tools.add(
      {"get_sandbox_status", "Sandbox status",
       "Reports one sandbox's state and current resource use (memory, CPU time, disk, "
       "processes). Without sandbox_id, summarises all your sandboxes.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
            {"additionalProperties", false}},
       json{{"type", "object"}}, json{{"readOnlyHint", true}, {"openWorldHint", false}}, nullptr},
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
        return ToolResult::from_structured(out);
      });

  tools.add(
      {"close_sandbox", "Close sandbox",
       "Destroys a sandbox: kills its processes and deletes its files (a persistent or paused "
       "sandbox's too). An unknown id is an error.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}}}, {"closed", {{"type", "boolean"}}}}},
            {"required", {"sandbox_id", "closed"}}},
       json{{"readOnlyHint", false},
            {"destructiveHint", true},
            {"idempotentHint", false},
            {"openWorldHint", false}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto [live, dormant] = env.manager.find_any(args["sandbox_id"], owner_of(ctx));
        if (!live && !dormant) {
          auto made = env.manager.get(args["sandbox_id"], owner_of(ctx));  // the not-found text
          if (!made.ok()) return error_result(made.error());
          live = *made;  // created meanwhile
        }
        const std::string id = live ? live->id() : dormant->id;
        if (auto s = env.manager.close(id, owner_of(ctx)); !s.ok()) return error_result(s.error());
        return ToolResult::from_structured(json{{"sandbox_id", id}, {"closed", true}});
      });
}

}  // namespace sandcastle::tools
