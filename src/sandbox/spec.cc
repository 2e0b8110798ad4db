#include "sandbox/spec.h"

namespace sandcastle::sandbox {

const char* network_mode_name(NetworkMode mode) {
  return net::mode_name(mode);
}

const char* persistence_name(Persistence p) {
  switch (p) {
    case Persistence::kEphemeral: return "ephemeral";
    case Persistence::kPersistent: return "persistent";
  }
  return "?";
}

bool valid_env_name(const std::string& name) {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!(alpha || (i > 0 && digit))) return false;
  }
  return true;
}

std::map<std::string, std::string> base_environment() {
  return {
      {"PATH", "/usr/local/bin:/usr/bin:/bin"},
      {"HOME", "/workspace"},
      {"USER", "sandbox"},
      {"LOGNAME", "sandbox"},
      {"SHELL", "/bin/sh"},
      {"LANG", "C.UTF-8"},
      {"TMPDIR", "/tmp"},
      {"TERM", "dumb"},
  };
}

namespace {

Error invalid(std::string what) { return Error::make(ErrorCode::kInvalidArgument, std::move(what)); }

bool valid_hostname(const std::string& h) {
  if (h.empty() || h.size() > 63) return false;
  for (char c : h) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    if (!ok) return false;
  }
  return h.front() != '-' && h.back() != '-';
}

}  // namespace

Result<SandboxSpec> SandboxSpec::create(SpecOptions o) {
  const Limits& l = o.limits;
  if (o.image.empty()) return invalid("spec.image: must not be empty");
  // 16 MiB is the least a dynamically linked interpreter needs to start.
  if (l.memory_bytes < 16 * kMiB) return invalid("spec.limits.memory_bytes: must be at least 16 MiB");
  if (l.pids < 4) return invalid("spec.limits.pids: must be at least 4");
  if (l.pids > 32768) return invalid("spec.limits.pids: must be at most 32768 (kernel.pid_max)");
  if (l.cpu_millis != 0 && l.cpu_millis < 10)
    return invalid("spec.limits.cpu_millis: must be 0 (unlimited) or at least 10");
  if (l.disk_bytes < 1 * kMiB) return invalid("spec.limits.disk_bytes: must be at least 1 MiB");
  if (l.tmp_bytes < 1 * kMiB) return invalid("spec.limits.tmp_bytes: must be at least 1 MiB");
  if (l.open_files < 16) return invalid("spec.limits.open_files: must be at least 16");
  if (l.open_files > 20000) return invalid("spec.limits.open_files: must be at most 20000");
  if (l.file_size_bytes < 1) return invalid("spec.limits.file_size_bytes: must be positive");
  if (l.exec_timeout.count() <= 0) return invalid("spec.limits.exec_timeout: must be positive");
  if (l.exec_timeout > std::chrono::hours(24)) return invalid("spec.limits.exec_timeout: at most 24 h");
  if (o.workdir.empty() || o.workdir.front() != '/')
    return invalid("spec.workdir: must be an absolute path");
  if (o.workdir.find("/../") != std::string::npos || o.workdir.ends_with("/.."))
    return invalid("spec.workdir: must not contain '..'");
  if (!valid_hostname(o.hostname)) return invalid("spec.hostname: letters, digits and '-' only");
  for (const auto& [k, v] : o.env) {
    if (!valid_env_name(k)) return invalid("spec.env: invalid variable name '" + k + "'");
    if (v.find('\0') != std::string::npos) return invalid("spec.env." + k + ": contains NUL");
  }
  if (auto r = net::parse_rules(o.network_allow, net::ListKind::kAllow); !r)
    return invalid("spec." + r.error().context);
  if (auto r = net::parse_rules(o.network_deny, net::ListKind::kDeny); !r)
    return invalid("spec." + r.error().context);
  if (o.persistence == Persistence::kPersistent) {
    const std::string& id = o.storage_id;
    if (id.empty() || id.size() > 64) return invalid("spec.storage_id: 1 to 64 characters for a persistent sandbox");
    for (char c : id)
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
        return invalid("spec.storage_id: only a-z, 0-9 and '-'");
  } else if (!o.storage_id.empty()) {
    return invalid("spec.storage_id: only for a persistent sandbox");
  }
  return SandboxSpec(std::move(o));
}

SandboxSpec SandboxSpec::defaults() { return SandboxSpec(SpecOptions{}); }

}  // namespace sandcastle::sandbox
