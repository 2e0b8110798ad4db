#include "service/sandbox_view.h"

#include <ctime>

#include "service/network.h"
#include "service/spec_record.h"

namespace sandcastle::service {

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
           {"packages", packages},
           {"network", network_json(e)}};
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

std::optional<json> find_listing(Env& env, const std::string& id_or_name,
                                 const std::string& owner) {
  auto [live, dormant] = env.manager.find_any(id_or_name, owner);
  if (live) return sandbox_json(*live);
  if (dormant) return dormant_json(*dormant, env.manager.store());
  return std::nullopt;
}

}  // namespace sandcastle::service
