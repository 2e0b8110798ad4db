// The service facade over the service's operations: the lifecycle
// (lifecycle.h, durable.h), runs (runs.h), the run history (history.h),
// images (images.h), save (save.h), packages (packages.h), files
// (file_listing.h and here), usage and the run registry, restart_kernel
// (run_env.h). It adds the shapes the REST API and the console read.
#include "service/sandboxes.h"

#include <map>
#include <mutex>
#include <set>

#include "service/ahead.h"
#include "service/durable.h"
#include "service/file_listing.h"
#include "service/file_transfer.h"
#include "service/history.h"
#include "service/images.h"
#include "service/lifecycle.h"
#include "service/network.h"
#include "service/packages.h"
#include "service/run_env.h"
#include "service/sandbox_view.h"
#include "service/sandbox_watch.h"
#include "service/save.h"

namespace sandcastle::service {

namespace {

json with_id(json args, const std::string& id) {
  if (!args.is_object()) args = json::object();
  args["sandbox_id"] = id;
  return args;
}

}  // namespace

json usage_json(const UsageSample& u) {
  return json{{"memory_bytes", u.memory_bytes},
              {"peak_memory_bytes", u.peak_memory_bytes},
              {"cpu_ms", u.cpu_ms},
              {"processes", u.processes},
              {"disk_bytes", u.disk_bytes}};
}

struct Sandboxes::Impl {
  Env& env;
  std::unique_ptr<SandboxWatch> watch;

  explicit Impl(Env& e) : env(e) {}

  // The caller's live sandbox, without starting a stopped one or touching it.
  Result<std::shared_ptr<SandboxEntry>> live(const Caller& c, const std::string& id) {
    auto [l, dormant] = env.manager.find_any(id, c.owner);
    if (l) return l;
    if (dormant)
      return Error::make(ErrorCode::kFailedPrecondition,
                         "sandbox " + dormant->id + " is " +
                             store::sandbox_status_name(dormant->status) + ": resume it first");
    return env.manager.get(id, c.owner);  // its not-found text (and a sandbox made meanwhile)
  }
};

Sandboxes::Sandboxes(Env& env)
    : impl_(std::make_unique<Impl>(env)), events_(std::make_unique<SandboxEvents>()) {
  impl_->watch = std::make_unique<SandboxWatch>(env.manager, *events_);
  // Until a one-shot says otherwise, the pool expects the default language.
  // (An image's own language table is known at its first one-shot.)
  if (auto lang = find_language(env.config.default_language);
      lang.ok() && env.config.default_image == "host" &&
      default_image_for(env.config, (*lang)->name) == env.config.default_image)
    follow_one_shot(env.config, env.manager.backend(), **lang);
}

Sandboxes::~Sandboxes() {
  // The watch thread publishes into events_, which (declared after impl_)
  // goes first: the thread stops before it.
  impl_->watch.reset();
}

Result<json> Sandboxes::create(const Caller& c, const json& args) {
  auto r = create_sandbox(impl_->env, c, args);
  if (r.ok()) (*r)["owner"] = c.owner;
  return r;
}

std::vector<json> Sandboxes::list(const Caller& c) {
  std::vector<json> out;
  for (const auto& l : impl_->env.manager.list_all(c.owner)) {
    json j = l.live ? sandbox_json(*l.live) : dormant_json(*l.dormant, impl_->env.manager.store());
    j["owner"] = c.owner;
    out.push_back(std::move(j));
  }
  return out;
}

Result<json> Sandboxes::get(const Caller& c, const std::string& id) {
  auto [live, dormant] = impl_->env.manager.find_any(id, c.owner);
  if (dormant) {
    json j = dormant_json(*dormant, impl_->env.manager.store());
    j["owner"] = c.owner;
    return j;
  }
  if (!live) {
    auto e = impl_->env.manager.get(id, c.owner);  // the not-found text
    if (!e.ok()) return e.error();
    live = *e;
  }
  json j = sandbox_json(*live);
  j["owner"] = c.owner;
  if (auto u = usage(c, live->id()); u.ok()) j["usage"] = usage_json(*u);
  return j;
}

Result<json> Sandboxes::close(const Caller& c, const std::string& id) {
  return close_sandbox(impl_->env, c, id);
}

Result<json> Sandboxes::pause(const Caller& c, const std::string& id, const json& args) {
  return pause_sandbox(impl_->env, c, with_id(args, id));
}
Result<json> Sandboxes::resume(const Caller& c, const std::string& id, const json& args) {
  return resume_sandbox(impl_->env, c, with_id(args, id));
}
Result<json> Sandboxes::fork(const Caller& c, const std::string& id, const json& args) {
  return fork_sandbox(impl_->env, c, with_id(args, id));
}
Result<json> Sandboxes::save(const Caller& c, const std::string& id, const json& args) {
  return save_sandbox(impl_->env, c, with_id(args, id));
}
Result<json> Sandboxes::set_network(const Caller& c, const std::string& id, const json& args) {
  return set_sandbox_network(impl_->env, c, with_id(args, id));
}

Result<json> Sandboxes::run_code(const Caller& c, const json& args, const RunOptions& opts) {
  auto r = service::run_code(impl_->env, c, args, opts);
  if (!r.ok()) return r.error();
  return run_result_json(*r);
}

Result<json> Sandboxes::run_command(const Caller& c, const json& args, const RunOptions& opts) {
  auto r = service::run_command(impl_->env, c, args, opts);
  if (!r.ok()) return r.error();
  return run_result_json(*r);
}

Result<bool> Sandboxes::interrupt(const Caller& c, const std::string& id) {
  auto [live, dormant] = impl_->env.manager.find_any(id, c.owner);
  if (dormant) return false;  // nothing runs in a paused or stopped sandbox
  if (!live) {
    auto e = impl_->env.manager.get(id, c.owner);  // the not-found text
    if (!e.ok()) return e.error();
    live = *e;
  }
  return impl_->env.runs->interrupt(live->id()) > 0;
}

Result<json> Sandboxes::restart_kernel(const Caller& c, const std::string& id) {
  return service::restart_kernel(impl_->env, c, id);
}

Result<json> Sandboxes::history(const Caller& c, const std::string& id, std::int64_t before,
                                std::size_t limit) {
  json args{{"sandbox_id", id}};
  if (before > 0) args["before"] = before;
  if (limit > 0) args["limit"] = limit;
  return sandbox_history(impl_->env, c, args);
}

Result<json> Sandboxes::list_files(const Caller& c, const std::string& id,
                                   const std::string& path) {
  auto r = service::list_files(impl_->env, c, id, path.empty() ? "." : path, false);
  if (!r.ok()) return r.error();
  json entries = json::array();
  for (const auto& f : r->entries)
    entries.push_back(json{{"name", f.name},
                           {"path", f.path},
                           {"type", f.type},
                           {"size", f.size},
                           {"mode", f.mode},
                           {"mtime", f.modified}});
  return json{{"path", r->path}, {"entries", std::move(entries)}, {"truncated", r->truncated}};
}

Result<FileContent> Sandboxes::read_file(const Caller& c, const std::string& id,
                                         const std::string& path, std::uint64_t max_bytes) {
  auto e = impl_->live(c, id);
  if (!e.ok()) return e.error();
  EntryUse use(*e);
  const std::uint64_t cap = max_bytes ? max_bytes : impl_->env.config.max_file_bytes;
  auto read = read_bounded(use->sandbox(), *impl_->env.config.transfer_budget, path, 0,
                           std::nullopt, cap, kLinkCopies);
  if (!read.ok()) return read.error();
  if (read->file.too_large)
    return Error::make(ErrorCode::kResourceExhausted,
                       path + " is " + std::to_string(read->file.size) + " bytes, more than the " +
                           std::to_string(cap) + "-byte limit");
  FileContent out;
  out.path = path;
  out.size = read->file.size;
  out.data = std::move(read->file.data);
  return out;
}

Result<json> Sandboxes::write_file(const Caller& c, const std::string& id, const std::string& path,
                                   std::string_view data) {
  auto r = write_files(c, id, {FileUpload{path, data}});
  if (!r.ok()) return r;
  return std::move((*r)[0]);
}

Result<json> Sandboxes::write_files(const Caller& c, const std::string& id,
                                    const std::vector<FileUpload>& files) {
  const auto cap = impl_->env.config.max_file_bytes;
  for (const auto& f : files)  // before the sandbox is looked up, as before
    if (f.data.size() > cap)
      return Error::make(ErrorCode::kResourceExhausted,
                         f.path + " is " + std::to_string(f.data.size()) +
                             " bytes, more than the " + std::to_string(cap) +
                             "-byte limit of one write");
  auto e = impl_->live(c, id);
  if (!e.ok()) return e.error();
  EntryUse use(*e);
  if (auto s = write_all_or_none(use->sandbox(), *impl_->env.config.transfer_budget, files);
      !s.ok())
    return s.error();
  json out = json::array();
  for (const auto& f : files) out.push_back(json{{"path", f.path}, {"size", f.data.size()}});
  return out;
}

Status Sandboxes::remove_file(const Caller& c, const std::string& id, const std::string& path,
                              bool recursive) {
  auto e = impl_->live(c, id);
  if (!e.ok()) return e.error();
  EntryUse use(*e);
  return use->sandbox().remove(path, recursive);
}

Sandboxes::OpenTerminal::~OpenTerminal() {
  terminal.reset();
}

Result<std::unique_ptr<Sandboxes::OpenTerminal>> Sandboxes::open_terminal(
    const Caller& c, const std::string& id, const sandbox::TerminalRequest& req) {
  auto e = impl_->live(c, id);
  if (!e.ok()) return e.error();
  auto use = std::make_shared<EntryUse>(*e);
  auto t = (*use)->sandbox().open_terminal(req);
  if (!t.ok()) return t.error();
  auto out = std::make_unique<OpenTerminal>();
  out->lease = std::move(use);
  out->terminal = std::move(*t);
  return out;
}

std::uint64_t Sandboxes::max_file_bytes() const {
  return impl_->env.config.max_file_bytes;
}

Result<json> Sandboxes::install_packages(const Caller& c, const std::string& id, const json& args) {
  return service::install_packages(impl_->env, c, with_id(args, id));
}

Result<json> Sandboxes::packages(const Caller& c, const std::string& id) {
  auto r = package_status(impl_->env, c, json{{"sandbox_id", id}});
  if (!r.ok()) return r;
  json out = json::array();
  for (auto p : (*r)["packages"]) {
    p["name"] = p["package"];
    p.erase("package");
    out.push_back(std::move(p));
  }
  return json{{"packages", std::move(out)}};
}

Result<json> Sandboxes::images(const Caller& c) {
  (void)c;  // every caller sees the same images
  return list_images(impl_->env);
}

Result<UsageSample> Sandboxes::usage(const Caller& c, const std::string& id) {
  auto e = impl_->live(c, id);
  if (!e.ok()) return e.error();
  // Not an EntryUse: watching a sandbox is not using it (its TTL runs on).
  auto u = (*e)->sandbox().usage();
  if (!u.ok()) return u.error();
  UsageSample s;
  s.sandbox_id = (*e)->id();
  s.memory_bytes = u->memory_bytes;
  s.peak_memory_bytes = u->peak_memory_bytes;
  s.cpu_ms = static_cast<double>(u->cpu_time.count()) / 1000.0;
  s.processes = u->processes;
  s.disk_bytes = u->disk_bytes;
  return s;
}

std::vector<UsageSample> Sandboxes::usage_some(const std::optional<std::string>& owner,
                                               std::size_t start, std::size_t max,
                                               std::size_t* total) {
  std::vector<UsageSample> out;
  const auto every = impl_->env.manager.list_every(owner);
  *total = every.size();
  for (std::size_t i = start; i < every.size() && i - start < max; ++i) {
    const auto& e = every[i];
    if (e->frozen()) continue;
    auto u = usage(Caller{e->owner(), {}}, e->id());
    if (u.ok()) out.push_back(std::move(*u));
  }
  return out;
}

std::size_t Sandboxes::live_count() const {
  return impl_->env.manager.live_count();
}
std::size_t Sandboxes::max_sandboxes() const {
  return impl_->env.manager.options().max_sandboxes;
}
std::size_t Sandboxes::warm_ready() const {
  return impl_->env.manager.pool_ready();
}

}  // namespace sandcastle::service
