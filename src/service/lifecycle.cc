#include "service/lifecycle.h"

#include <memory>
#include <mutex>

#include "service/images.h"
#include "service/network.h"
#include "service/op_args.h"
#include "service/run_env.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

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

}  // namespace

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

json sandbox_id_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
              {"required", {"sandbox_id"}},
              {"additionalProperties", false}};
}

json create_input_schema(const Config& config) {
  json image_schema{
      {"type", "string"},
      {"description",
       "The sandbox's root filesystem: an image from list_images (its files, languages, env, "
       "working dir and user; writes stay in the sandbox and count against disk_mb), or "
       "\"host\" = the host's own /usr read-only."}};
  if (config.language_images.empty()) image_schema["default"] = config.default_image;
  return json{{"type", "object"},
              {"properties",
               {{"language",
                 {{"type", "string"},
                  {"default", config.default_language},
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
                {"network", network_arg_schema(config)},
                {"ttl_s",
                 {{"type", "integer"},
                  {"minimum", 10},
                  {"maximum", 7 * 24 * 3600},
                  {"description", "Idle seconds before the ttl_action (default 1800)."}}}}},
              {"additionalProperties", false}};
}

namespace {

const json& create_schema(Env& env) {
  Env::InputSchemas& s = *env.input_schemas;
  std::call_once(s.create_once,
                 [&] { s.create = std::make_unique<const json>(create_input_schema(env.config)); });
  return *s.create;
}

}  // namespace

Result<json> create_sandbox(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("create_sandbox", create_schema(env), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  const std::string lang_arg = args["language"].get<std::string>();
  const std::string image = args.contains("image") ? args["image"].get<std::string>()
                                                   : default_image_for(env.config, lang_arg);
  auto lang = language_for_image(env, lang_arg, image);
  if (!lang.ok()) return lang.error();
  CreateRequest req;
  req.language = (*lang)->name;
  req.name = args.value("name", std::string());
  req.owner = c.owner;
  if (args.contains("ttl_s")) req.ttl = std::chrono::seconds(args["ttl_s"].get<int64_t>());
  req.spec.image = image;
  req.spec.limits = apply_limits(env.config.default_limits, args.value("limits", json::object()));
  req.spec.env = env.config.pass_through_env;
  if (args.contains("env"))
    for (const auto& [k, v] : args["env"].items()) req.spec.env[k] = v.get<std::string>();
  if (args["persistent"].get<bool>()) req.spec.persistence = sandbox::Persistence::kPersistent;
  if (auto s = apply_network_args(env.config, args.contains("network") ? &args["network"] : nullptr,
                                  req.spec);
      !s.ok())
    return s.take_error();
  req.ttl_action =
      args.contains("ttl_action")
          ? args["ttl_action"].get<std::string>()
          : (req.spec.persistence == sandbox::Persistence::kPersistent ? "pause" : "destroy");
  auto entry = env.manager.create(req);
  if (!entry.ok()) return entry.error();
  start_kernel_async(*entry);  // python/javascript: the interpreter warms up meanwhile
  return sandbox_json(**entry);
}

json list_sandboxes(Env& env, const Caller& c) {
  json list = json::array();
  for (const auto& l : env.manager.list_all(c.owner))
    list.push_back(l.live ? sandbox_json(*l.live) : dormant_json(*l.dormant, env.manager.store()));
  const std::size_t n = list.size();
  return json{{"sandboxes", std::move(list)}, {"count", n}};
}

Result<json> close_sandbox(Env& env, const Caller& c, const std::string& id_or_name) {
  auto [live, dormant] = env.manager.find_any(id_or_name, c.owner);
  if (!live && !dormant) {
    auto made = env.manager.get(id_or_name, c.owner);  // the not-found text
    if (!made.ok()) return made.error();
    live = *made;  // created meanwhile
  }
  const std::string id = live ? live->id() : dormant->id;
  if (auto s = env.manager.close(id, c.owner); !s.ok()) return s.error();
  return json{{"sandbox_id", id}, {"closed", true}};
}

}  // namespace sandcastle::service
