#include "service/durable.h"

#include "service/file_transfer.h"
#include "service/op_args.h"
#include "service/run_env.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

json id_schema(const char* what) {
  return json{{"type", "string"}, {"description", what}};
}

// fork_sandbox of an ephemeral sandbox: its workspace copied file by file
// through both sandboxes' in-sandbox file channels (never by the server on
// their trees). Each file is held once in the server's memory, under the
// transfer budget every file tool shares and at most max_file_bytes; the
// whole copy is bounded by the fork's disk limit and kForkMaxEntries.
constexpr std::size_t kForkMaxEntries = 100'000;

Status copy_workspace(const Env& env, sandbox::Sandbox& from, sandbox::Sandbox& to) {
  const std::string root = from.spec().workdir();
  sandbox::ListOptions lo;
  lo.recursive = true;
  lo.max_entries = kForkMaxEntries;
  auto listing = from.list(root, lo);
  if (!listing.ok()) return listing.take_error();
  if (listing->truncated)
    return Error::make(ErrorCode::kResourceExhausted,
                       "more than " + std::to_string(kForkMaxEntries) + " files under " + root +
                           ": fork a persistent sandbox instead (its disk is copied whole)");
  std::uint64_t left = to.spec().limits().disk_bytes;
  const std::uint64_t cap = env.config.max_file_bytes;
  for (const auto& f : listing->entries) {
    const std::string path = root + "/" + f.name;
    if (f.type == sandbox::FileType::kDirectory) {
      if (auto s = to.mkdir(path, true); !s.ok()) return s;
      continue;
    }
    if (f.type != sandbox::FileType::kRegular)
      continue;  // symlinks and special files are not copied
    auto read = read_bounded(from, *env.config.transfer_budget, path, 0, std::nullopt, cap, 1);
    if (!read.ok()) return read.take_error();
    if (read->file.too_large)
      return Error::make(
          ErrorCode::kResourceExhausted,
          path + " is " + std::to_string(read->file.size) +
              " bytes: an ephemeral sandbox's fork copies files up to " + std::to_string(cap) +
              " bytes each; fork a persistent sandbox instead (its disk is copied whole)");
    if (read->file.data.size() > left)
      return Error::make(ErrorCode::kResourceExhausted, "the files exceed the fork's disk limit");
    left -= read->file.data.size();
    if (auto s = to.write_file(path, read->file.data, f.mode & 07777, true); !s.ok()) return s;
  }
  return ok_status();
}

std::optional<PauseMode> pause_mode(const std::string& s) {
  if (s == "auto") return PauseMode::kAuto;
  if (s == "freeze") return PauseMode::kFreeze;
  if (s == "stop") return PauseMode::kStop;
  return std::nullopt;
}

}  // namespace

json pause_input_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"sandbox_id", id_schema("Sandbox id or name.")},
        {"mode", {{"type", "string"}, {"enum", {"auto", "freeze", "stop"}}, {"default", "auto"}}}}},
      {"required", {"sandbox_id"}},
      {"additionalProperties", false}};
}
json pause_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}}},
                {"status", {{"type", "string"}}},
                {"mode", {{"type", "string"}}},
                {"memory_saved", {{"type", "boolean"}}},
                {"note", {{"type", "string"}}}}},
              {"required", {"sandbox_id", "status", "mode", "memory_saved"}}};
}
json resume_input_schema() {
  return json{{"type", "object"},
              {"properties", {{"sandbox_id", id_schema("Sandbox id or name.")}}},
              {"required", {"sandbox_id"}},
              {"additionalProperties", false}};
}
json resume_output_schema() {
  return json{
      {"type", "object"},
      {"properties", {{"sandbox_id", {{"type", "string"}}}, {"state_lost", {{"type", "boolean"}}}}},
      {"required", {"sandbox_id", "state_lost"}}};
}
json fork_input_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"sandbox_id", id_schema("Sandbox to copy: id or name.")},
        {"name",
         {{"type", "string"}, {"maxLength", 64}, {"description", "Name of the new sandbox."}}}}},
      {"required", {"sandbox_id"}},
      {"additionalProperties", false}};
}
json fork_output_schema() {
  return json{
      {"type", "object"},
      {"properties", {{"sandbox_id", {{"type", "string"}}}, {"forked_from", {{"type", "string"}}}}},
      {"required", {"sandbox_id", "forked_from"}}};
}

Result<json> pause_sandbox(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("pause_sandbox", pause_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  auto mode = pause_mode(args["mode"].get<std::string>());
  if (!mode) return Error::make(ErrorCode::kInvalidArgument, "mode: one of auto, freeze, stop");
  const std::string id = args["sandbox_id"].get<std::string>();
  auto r = env.manager.pause(id, c.owner, *mode);
  if (!r.ok()) return r.error();
  return json{{"sandbox_id", id},
              {"status", "paused"},
              {"mode", r->mode},
              {"memory_saved", r->memory_saved},
              {"note", r->note}};
}

Result<json> resume_sandbox(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("resume_sandbox", resume_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  auto e = env.manager.resume((*checked)["sandbox_id"].get<std::string>(), c.owner);
  if (!e.ok()) return e.error();
  json out = sandbox_json(**e);
  // Said here and kept for the next run, which reports it too.
  bool lost = (*e)->take_state_lost();
  if (lost) (*e)->set_state_lost();
  out["state_lost"] = lost;
  return out;
}

Result<json> fork_sandbox(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("fork_sandbox", fork_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  const std::string from = args["sandbox_id"].get<std::string>();
  auto e = env.manager.fork(
      from, c.owner, args.value("name", std::string()),
      [&env](sandbox::Sandbox& a, sandbox::Sandbox& b) { return copy_workspace(env, a, b); });
  if (!e.ok()) return e.error();
  start_kernel_async(*e);
  json out = sandbox_json(**e);
  out["forked_from"] = from;
  return out;
}

}  // namespace sandcastle::service
