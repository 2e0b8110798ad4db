#include "service/history.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "service/op_args.h"
#include "service/sandbox_view.h"
#include "store/sqlite_sandbox_store.h"

namespace sandcastle::service {

namespace {

// The head of a (possibly long) string field of the result, at most `n`
// bytes, without copying the rest.
std::string head_of(const json& obj, const char* key, std::size_t n, bool* cut) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) return {};
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() <= n) return s;
  *cut = true;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// The sandbox a run used: the result says (null for a one-shot run); an
// error result without structured content names none, so the argument is
// resolved (nothing is recorded when it names no sandbox of the caller's).
std::optional<std::string> sandbox_of(Env& env, const std::string& owner, const json& args,
                                      const json* result) {
  if (result && result->is_object()) {
    auto it = result->find("sandbox_id");
    if (it != result->end() && it->is_string()) return it->get<std::string>();
    return std::string();  // one-shot: the sandbox is gone with the call
  }
  if (!args.contains("sandbox_id") || !args["sandbox_id"].is_string()) return std::nullopt;
  // Looked up without get(), which would start a stopped sandbox (the
  // failed call may have been refused for that very reason).
  auto [live, dormant] = env.manager.find_any(args["sandbox_id"].get<std::string>(), owner);
  if (live) return live->id();
  if (dormant) return dormant->id;
  return std::nullopt;
}

const store::SandboxStore& reader(Env& env) {
  return env.store ? *env.store : env.manager.store();
}

json entry_json(const store::HistoryEntry& e) {
  return json{{"seq", e.seq},
              {"at", iso_time(e.at)},
              {"caller", e.caller},
              {"tool", e.tool},
              {"language", e.language},
              {"input", e.input},
              {"stdout", e.stdout_data},
              {"stderr", e.stderr_data},
              {"truncated", e.truncated},
              {"exit_code", e.exit_code},
              {"reason", e.reason},
              {"duration_ms", static_cast<double>(e.duration_us) / 1000.0},
              {"files_created", e.files_created},
              {"images", e.images}};
}

}  // namespace

json history_input_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id",
                 {{"type", "string"}, {"minLength", 1}, {"description", "Sandbox id or name."}}},
                {"limit",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"maximum", kMaxHistoryLimit},
                  {"default", kDefaultHistoryLimit},
                  {"description", "Most entries returned."}}},
                {"before",
                 {{"type", "integer"},
                  {"minimum", 1},
                  {"description",
                   "Only entries older than this seq (next_before of the previous page)."}}}}},
              {"required", {"sandbox_id"}},
              {"additionalProperties", false}};
}

json history_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}}},
                {"entries", {{"type", "array"}}},
                {"count", {{"type", "integer"}}},
                {"next_before", {{"type", "integer"}}}}},
              {"required", {"sandbox_id", "entries", "count"}}};
}

Result<json> sandbox_history(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("get_sandbox_history", history_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  const std::string asked = args["sandbox_id"].get<std::string>();
  const std::string& owner = c.owner;
  const std::size_t limit =
      std::clamp<std::size_t>(args.value("limit", kDefaultHistoryLimit), 1, kMaxHistoryLimit);
  std::optional<std::int64_t> before;
  if (args.contains("before")) before = args["before"].get<std::int64_t>();
  const auto& store = reader(env);

  // The caller's sandbox by id or name, from the store's records (live,
  // paused or stopped alike: looking does not start a stopped one), or an
  // ended one whose runs say they were the caller's. Anything else gets
  // the manager's not-found, the same as for every other tool.
  std::string id;
  if (auto rec = store.get(asked); rec && rec->owner == owner) {
    id = rec->id;
  } else {
    if (auto all = store.list(); all.ok())
      for (const auto& r : *all)
        if (r.owner == owner && r.name == asked) id = r.id;
    if (id.empty()) {
      auto probe = store.history(asked, 1, std::nullopt);
      if (!probe.entries.empty() && probe.entries[0].caller == owner) id = asked;
    }
  }
  if (id.empty()) {
    auto live = env.manager.get(asked, owner);
    if (!live.ok()) return live.error();
    id = (*live)->id();  // a sandbox the store does not list (no store records)
  }

  auto page = store.history(id, limit, before);
  json entries = json::array();
  for (const auto& e : page.entries) {
    if (e.caller != owner) continue;  // never another owner's runs
    entries.push_back(entry_json(e));
  }
  json out{{"sandbox_id", id}, {"entries", entries}, {"count", entries.size()}};
  if (page.next_before) out["next_before"] = *page.next_before;
  return out;
}

void record_run(Env& env, const std::string& owner, const char* tool, const json& args,
                const RunOutcome& res, std::chrono::steady_clock::time_point started) {
  if (!env.store) return;
  auto sandbox = sandbox_of(env, owner, args, res.result);
  if (!sandbox) return;
  store::HistoryEntry e;
  e.sandbox_id = std::move(*sandbox);
  e.at = std::chrono::system_clock::now();
  e.caller = owner;
  e.tool = tool;
  const store::HistoryLimits caps;
  bool cut = false;
  e.input = head_of(args, std::string(tool) == "execute_code" ? "code" : "command",
                    caps.max_input_bytes, &cut);
  if (res.result && res.result->is_object()) {
    const json& out = *res.result;
    e.language = out.value("language", args.value("language", ""));
    e.stdout_data = head_of(out, "stdout", caps.max_output_bytes, &cut);
    e.stderr_data = head_of(out, "stderr", caps.max_output_bytes, &cut);
    e.truncated = out.value("truncated", false);
    e.exit_code = out.value("exit_code", -1);
    e.reason = out.value("reason", "");
    if (out.contains("duration_ms") && out["duration_ms"].is_number())
      e.duration_us = static_cast<std::int64_t>(out["duration_ms"].get<double>() * 1000.0);
    if (auto f = out.find("files_created"); f != out.end() && f->is_array())
      for (const auto& file : *f) {
        if (e.files_created.size() == caps.max_files) {
          cut = true;
          break;
        }
        if (file.is_object() && file.contains("path") && file["path"].is_string())
          e.files_created.push_back(file["path"].get<std::string>());
      }
  } else {  // the run failed before it had a result (the sandbox died, ...)
    e.language = args.value("language", "");
    e.reason = "error";
    e.stderr_data = res.error_text;
    cut |= e.stderr_data.size() > caps.max_output_bytes;
  }
  if (e.duration_us == 0)
    e.duration_us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - started)
                        .count();
  e.images = static_cast<decltype(e.images)>(res.images);
  e.truncated = e.truncated || cut;
  // A failed write loses this entry only; the run's result stands.
  if (auto s = env.store->append_history(e); !s.ok())
    spdlog::warn("run history: {}", s.error().message());
}

}  // namespace sandcastle::service
