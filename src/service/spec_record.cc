#include "service/spec_record.h"

#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace sandcastle::service {

using nlohmann::json;

std::string spec_to_json(const sandbox::SpecOptions& o) {
  const auto& l = o.limits;
  return json{{"version", 1},
              {"image", o.image},
              {"limits",
               {{"memory_bytes", l.memory_bytes},
                {"pids", l.pids},
                {"cpu_millis", l.cpu_millis},
                {"disk_bytes", l.disk_bytes},
                {"tmp_bytes", l.tmp_bytes},
                {"open_files", l.open_files},
                {"file_size_bytes", l.file_size_bytes},
                {"exec_timeout_ms", l.exec_timeout.count()}}},
              {"env", o.env},
              {"workdir", o.workdir},
              {"hostname", o.hostname},
              {"network", sandbox::network_mode_name(o.network)},
              {"network_allow", o.network_allow},
              {"network_deny", o.network_deny},
              {"persistent", o.persistence == sandbox::Persistence::kPersistent},
              {"storage_id", o.storage_id}}
      .dump();
}

namespace {

Error bad_record(const std::string& what) {
  return Error::make(ErrorCode::kInvalidArgument, "stored sandbox spec: " + what);
}

}  // namespace

Result<sandbox::SpecOptions> spec_from_json(const std::string& text) {
  // Depth and size: the record is ours and small (an env map at most two
  // levels down); anything else is damage.
  auto parsed = parse_json(text, JsonLimits{.max_bytes = std::size_t{1} << 20, .max_depth = 4});
  if (!parsed.ok()) return bad_record(parsed.error().message());
  const json& j = *parsed;
  if (!j.is_object() || j.value("version", 0) != 1) return bad_record("not a version 1 record");
  sandbox::SpecOptions o;
  try {
    o.image = j.at("image").get<std::string>();
    const json& l = j.at("limits");
    o.limits.memory_bytes = l.at("memory_bytes").get<std::uint64_t>();
    o.limits.pids = l.at("pids").get<std::uint32_t>();
    o.limits.cpu_millis = l.at("cpu_millis").get<std::uint32_t>();
    o.limits.disk_bytes = l.at("disk_bytes").get<std::uint64_t>();
    o.limits.tmp_bytes = l.at("tmp_bytes").get<std::uint64_t>();
    o.limits.open_files = l.at("open_files").get<std::uint32_t>();
    o.limits.file_size_bytes = l.at("file_size_bytes").get<std::uint64_t>();
    o.limits.exec_timeout = std::chrono::milliseconds(l.at("exec_timeout_ms").get<std::int64_t>());
    o.env = j.at("env").get<std::map<std::string, std::string>>();
    o.workdir = j.at("workdir").get<std::string>();
    o.hostname = j.at("hostname").get<std::string>();
    // parse_mode also takes "allow-list", written before "full" existed.
    const std::string net = j.at("network").get<std::string>();
    auto mode = net::parse_mode(net);
    if (!mode) return bad_record("unknown network mode '" + net + "'");
    o.network = *mode;
    // Absent in records written before the rule lists existed.
    o.network_allow = j.value("network_allow", std::vector<std::string>{});
    o.network_deny = j.value("network_deny", std::vector<std::string>{});
    o.persistence = j.at("persistent").get<bool>() ? sandbox::Persistence::kPersistent
                                                   : sandbox::Persistence::kEphemeral;
    o.storage_id = j.at("storage_id").get<std::string>();
  } catch (const json::exception& e) {
    return bad_record(e.what());
  }
  if (auto s = sandbox::SandboxSpec::create(o); !s.ok()) return bad_record(s.error().message());
  return o;
}

}  // namespace sandcastle::service
