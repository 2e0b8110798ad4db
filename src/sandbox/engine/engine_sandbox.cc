#include "sandbox/engine/engine_sandbox.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include "sandbox/native/host_image.h"

namespace sandcastle::sandbox::engine {

EngineSandbox::EngineSandbox(std::shared_ptr<EngineShared> shared, std::string id, SandboxSpec spec,
                             EngineContainer container)
    : shared_(std::move(shared)),
      id_(std::move(id)),
      spec_(std::move(spec)),
      container_(std::move(container)),
      files_([this] { return connect_files(); }) {
  terminal_link_->link = container_.link.get();
}

EngineSandbox::~EngineSandbox() {
  (void)destroy();
}

Status EngineSandbox::check_alive() const {
  std::lock_guard l(mu_);
  if (destroyed_) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " was destroyed");
  if (!container_.link->alive())
    return Error::make(ErrorCode::kUnavailable,
                       "sandbox " + id_ + " is gone: " + container_.link->end_reason());
  return ok_status();
}

// A file session: a channel the agent serves with a file worker of its own
// (the sandbox user, inside the container), speaking file_wire.h.
Result<UniqueFd> EngineSandbox::connect_files() {
  if (auto st = check_alive(); !st) return st.take_error();
  AgentLink& link = *container_.link;
  auto ch = link.open_channel();
  if (!ch) return ch.take_error();
  if (auto st =
          link.send_control(encode_files(ch->first, spec_.limits().file_size_bytes), {ch->first});
      !st)
    return st.take_error();
  return std::move(ch->second);
}

Result<std::string> EngineSandbox::resolve(const std::string& path) const {
  auto rel = native::sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return "/" + *rel;
}

Result<FileStat> EngineSandbox::stat(const std::string& path) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  return files_.stat(*p);
}

Result<Listing> EngineSandbox::list(const std::string& path, const ListOptions& options) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  return files_.list(*p, options);
}

Result<FileData> EngineSandbox::read_file(const std::string& path, const ReadRange& range) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  return files_.read(*p, range);
}

Status EngineSandbox::write_file(const std::string& path, std::string_view data, std::uint32_t mode,
                                 bool parents) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to write /");
  return files_.write(*p, data, mode, parents);
}

Status EngineSandbox::mkdir(const std::string& path, bool parents) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  return files_.mkdir(*p, parents);
}

Status EngineSandbox::remove(const std::string& path, bool recursive) {
  auto p = resolve(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to operate on /");
  return files_.remove(*p, recursive);
}

Status EngineSandbox::rename(const std::string& from, const std::string& to) {
  auto f = resolve(from);
  if (!f) return f.take_error();
  auto t = resolve(to);
  if (!t) return t.take_error();
  if (*f == "/" || *t == "/")
    return Error::make(ErrorCode::kInvalidArgument, "refusing to rename /");
  return files_.rename(*f, *t);
}

// Memory, CPU and processes from the engine's stats (its cgroup), disk from
// inside (the file worker's statfs of /workspace).
Result<Usage> EngineSandbox::usage() {
  if (auto st = check_alive(); !st) return st.take_error();
  auto stats = shared_->client->container_stats(container_.container_id, true);
  if (!stats) return stats.take_error();
  Usage u;
  u.accounting = "engine cgroup";
  const auto& j = *stats;
  auto num = [](const nlohmann::json& o, const char* k) -> std::uint64_t {
    auto it = o.find(k);
    return it != o.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
  };
  if (auto m = j.find("memory_stats"); m != j.end() && m->is_object()) {
    u.memory_bytes = num(*m, "usage");
    u.peak_memory_bytes = num(*m, "max_usage");
  }
  if (auto c = j.find("cpu_stats"); c != j.end() && c->is_object())
    if (auto cu = c->find("cpu_usage"); cu != c->end() && cu->is_object())
      u.cpu_time = std::chrono::microseconds(num(*cu, "total_usage") / 1000);
  if (auto p = j.find("pids_stats"); p != j.end() && p->is_object())
    u.processes = static_cast<std::uint32_t>(std::min<std::uint64_t>(num(*p, "current"), 1u << 30));
  if (auto figures = files_.usage(); figures.ok()) u.disk_bytes = figures->disk_bytes;
  return u;
}

Status EngineSandbox::publish_shared(const std::string& name, std::string_view data) {
  if (shared_->remote) {
    if (auto st = check_alive(); !st) return st;
    auto st = shared_->remote->publish(*shared_->client, container_.container_id, name, data);
    if (st) {
      std::lock_guard l(mu_);
      container_.shared_names.insert(name);
    }
    return st;
  }
  if (shared_->share_dir.empty())
    return Error::make(ErrorCode::kUnavailable, "this engine has no shared directory");
  native::RuntimeDirs dirs;
  dirs.share = shared_->share_dir;
  return native::publish_shared_file(dirs, name, data);
}

bool EngineSandbox::has_shared(const std::string& name) const {
  if (shared_->remote) {
    std::lock_guard l(mu_);
    return container_.shared_names.count(name) > 0;
  }
  if (shared_->share_dir.empty() || name.empty() || name.find('/') != std::string::npos ||
      name[0] == '.')
    return false;
  return ::access((shared_->share_dir + "/" + name).c_str(), F_OK) == 0;
}

Status EngineSandbox::freeze() {
  if (auto st = check_alive(); !st) return st;
  return shared_->client->container_pause(container_.container_id);
}

Status EngineSandbox::thaw() {
  if (auto st = check_alive(); !st) return st;
  return shared_->client->container_unpause(container_.container_id);
}

bool EngineSandbox::alive(std::chrono::milliseconds /*grace*/) const {
  std::lock_guard l(mu_);
  return !destroyed_ && container_.link && container_.link->alive();
}

Status EngineSandbox::destroy() {
  {
    std::lock_guard l(mu_);
    if (destroyed_) return ok_status();
    destroyed_ = true;
  }
  files_.close();
  if (container_.link) container_.link->close();
  shut_net_listeners();
  {
    std::lock_guard l(terminal_link_->mu);
    terminal_link_->link = nullptr;
  }
  // Every process is gone with the agent's stream; the container itself
  // (and its anonymous volumes) goes off the request path.
  shared_->remover->remove(container_.container_id);
  return ok_status();
}

}  // namespace sandcastle::sandbox::engine
