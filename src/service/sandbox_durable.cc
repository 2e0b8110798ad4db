// The persistent half of SandboxManager (issue 16): sandboxes whose files
// outlive their processes. A persistent sandbox is live (in by_id_) or
// dormant (its record in dormant_: stopped by a restart, or paused without
// memory); the backend keeps its files under its storage id, which is the
// sandbox id. Frozen sandboxes stay live, flagged, until resumed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "common/metrics.h"
#include "common/proc_identity.h"
#include "service/sandbox_manager.h"
#include "service/spec_record.h"

namespace sandcastle::service {

namespace {

PackageState package_state_of(const std::string& s) {
  if (s == "success") return PackageState::kSuccess;
  if (s == "failed") return PackageState::kFailed;
  return PackageState::kInstalling;
}

}  // namespace

std::shared_ptr<SandboxEntry> SandboxManager::insert_locked(std::shared_ptr<SandboxEntry> entry) {
  if (entry->persistent()) {
    const std::string id = entry->id();
    entry->on_package([store = store_, id](const PackageRecord& p) {
      store::PackageEntry pe;
      pe.name = p.name;
      pe.manager = p.manager;
      pe.state = package_state_name(p.state);
      pe.error = p.error;
      pe.updated = p.updated;
      pe.version = p.version;
      if (auto s = store->put_package(id, pe); !s.ok())
        spdlog::warn("recording package {} of {}: {}", p.name, id, s.error().message());
    });
  }
  by_id_[entry->id()] = entry;
  return entry;
}

SandboxListing SandboxManager::find_any(const std::string& id_or_name,
                                        const std::string& owner) const {
  std::lock_guard lock(mu_);
  if (auto live = find_live_locked(id_or_name, owner); live.ok()) return {*live, std::nullopt};
  return {nullptr, find_dormant_locked(id_or_name, owner)};
}

std::optional<store::SandboxRecord> SandboxManager::find_dormant_locked(
    const std::string& id_or_name, const std::string& owner) const {
  if (auto it = dormant_.find(id_or_name); it != dormant_.end() && it->second.owner == owner)
    return it->second;
  for (const auto& [_, r] : dormant_)
    if (r.owner == owner && r.name == id_or_name) return r;
  return std::nullopt;
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::wake(const store::SandboxRecord& rec,
                                                           bool state_lost) {
  std::lock_guard wake_lock(wake_mu_);
  {
    std::lock_guard lock(mu_);
    // Another call may have woken it while this one waited.
    if (auto it = by_id_.find(rec.id); it != by_id_.end()) return it->second;
    if (!dormant_.count(rec.id))
      return Error::make(ErrorCode::kNotFound, "sandbox '" + rec.id + "' was closed meanwhile");
    if (stopping_) return Error::make(ErrorCode::kUnavailable, "the server is shutting down");
    if (by_id_.size() + creating_ >= options_.max_sandboxes)
      return Error::make(
          ErrorCode::kResourceExhausted,
          cap_text() + ", so stopped sandbox '" + rec.id +
              "' cannot start; close one you no longer need (close_sandbox) and retry");
    // The owner's quota counts running sandboxes: one woken is one more.
    if (options_.max_per_owner > 0 && owned_locked(rec.owner) >= options_.max_per_owner)
      return Error::make(ErrorCode::kResourceExhausted,
                         "you already run " + std::to_string(options_.max_per_owner) +
                             " sandboxes, the quota per user, so '" + rec.id +
                             "' cannot start; pause or close one (pause_sandbox, close_sandbox) "
                             "and retry");
  }
  auto opts = spec_from_json(rec.spec_json);
  if (!opts.ok()) return opts.take_error();
  auto spec = sandbox::SandboxSpec::create(*opts);
  if (!spec.ok()) return spec.take_error();
  auto sb = backend_.create(*spec);
  if (!sb.ok())
    return Error::make(sb.error().code, "starting persistent sandbox '" + rec.id +
                                            "' again: " + sb.error().message());
  auto network = attach_network(**sb, options_.proxies, rec.id);
  if (!network.ok()) {
    (void)(*sb)->release();
    return Error::make(network.error().code, "starting persistent sandbox '" + rec.id +
                                                 "' again: " + network.error().message());
  }
  auto entry = std::make_shared<SandboxEntry>(rec, std::move(sb).value());
  entry->set_network(std::move(*network));
  for (const auto& p : store_->packages(rec.id))
    entry->set_package({p.name, p.manager, package_state_of(p.state), p.error, {}, p.version});
  if (state_lost) entry->set_state_lost();
  std::unique_lock lock(mu_);
  if (stopping_) {
    lock.unlock();
    entry->drop_network();
    (void)entry->sandbox().release();
    return Error::make(ErrorCode::kUnavailable, "the server is shutting down");
  }
  dormant_.erase(rec.id);
  insert_locked(entry);
  changed(rec.id, rec.owner);
  store::SandboxRecord now = rec;
  now.server = options_.server_identity;
  now.status = store::SandboxStatus::kRunning;
  now.memory_saved = false;
  (void)store_->put(now);
  metrics::registry().counter(metrics::name::kSandboxesCreated, "sandboxes created").inc();
  return entry;
}

void SandboxManager::stop_persistent(SandboxEntry& e, store::SandboxStatus status) {
  if (e.frozen()) (void)e.sandbox().thaw();
  e.drop_network();
  if (auto s = e.sandbox().release(); !s.ok())
    spdlog::warn("stopping persistent sandbox {}: {}", e.id(), s.error().message());
  store::SandboxRecord r;
  r.id = e.id();
  r.name = e.name();
  r.owner = e.owner();
  r.language = e.language();
  r.image = e.spec().image();
  r.persistent = true;
  r.created_at = e.created_at();
  r.last_used_at = e.last_used();
  r.ttl = e.ttl();
  r.ttl_action = e.ttl_action();
  r.status = status;
  r.memory_saved = false;
  r.spec_json = spec_to_json(e.spec_options());
  r.server = options_.server_identity;
  if (auto s = store_->put(r); !s.ok())
    spdlog::warn("recording stopped sandbox {}: {}", e.id(), s.error().message());
  std::lock_guard lock(mu_);
  dormant_[r.id] = r;
  changed(r.id, r.owner);
}

bool SandboxManager::bury_dead(const std::shared_ptr<SandboxEntry>& e) {
  // A persistent one is dormant from the moment it leaves by_id_, so a
  // concurrent call finds it there and its wake waits (wake_mu_) until the
  // storage is released below: never "not found", never mounted twice.
  std::unique_lock wake_lock(wake_mu_, std::defer_lock);
  if (e->persistent()) wake_lock.lock();
  {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(e->id());
    if (it == by_id_.end() || it->second != e) return false;
    by_id_.erase(it);
    changed(e->id(), e->owner());
    if (e->persistent()) {
      store::SandboxRecord r = record_of(*e, options_.server_identity);
      r.status = store::SandboxStatus::kStopped;
      dormant_[r.id] = r;
    } else {
      // Before it leaves the lock: a call that looks it up next is told.
      const std::string lost = e->sandbox().lost_reason();
      ended_.remember(e->id(), lost.empty() ? std::string(kEndedUnexpectedly) : lost);
      if (e->recorded()) (void)store_->remove(e->id());
    }
  }
  admission_.notify();
  if (e->persistent()) {
    spdlog::warn(
        "sandbox {}: its processes died (killed from outside, or its zygote was); "
        "stopped, its files kept: the next call starts it again",
        e->id());
    stop_persistent(*e, store::SandboxStatus::kStopped);
  } else {
    spdlog::warn(
        "sandbox {}: its processes died (killed from outside, or its zygote was); "
        "removed",
        e->id());
    if (e->frozen()) (void)e->sandbox().thaw();
    if (auto s = e->sandbox().destroy(); !s.ok())
      spdlog::warn("destroying sandbox {}: {}", e->id(), s.error().message());
    metrics::registry().counter(metrics::name::kSandboxesDestroyed, "sandboxes destroyed").inc();
  }
  return true;
}

std::optional<Error> SandboxManager::ended_during_call(const std::shared_ptr<SandboxEntry>& e,
                                                       std::chrono::milliseconds grace) {
  if (e->sandbox().alive(grace)) return std::nullopt;
  bury_dead(e);  // or another call did: the same words either way
  if (e->persistent())
    return Error::make(ErrorCode::kUnavailable,
                       "sandbox '" + e->id() +
                           "' restarted during this call: its processes were killed (its init "
                           "was killed from outside or by the kernel's OOM killer, or the "
                           "server's zygote process died), so this call may have run in part. "
                           "Its files and installed packages are kept and it starts again at "
                           "your next call (which says state_lost: variables and background "
                           "processes are gone): check what the call did, and run it again");
  const std::string lost = e->sandbox().lost_reason();
  if (!lost.empty()) return Error::make(ErrorCode::kUnavailable, lost);
  return Error::make(ErrorCode::kNotFound,
                     "sandbox '" + e->id() + "' no longer exists: " + kEndedUnexpectedly);
}

Status SandboxManager::recover() {
  if (!options_.persistent_refusal.empty()) return ok_status();  // not this server's to sweep
  std::set<std::string> kept;
  auto records = store_->list();
  // Without the whole list nothing may be judged orphaned: a busy or
  // damaged database would otherwise cost every persistent sandbox its disk.
  if (!records.ok())
    return Error::make(records.error().code,
                       "reading the sandbox records: " + records.error().message() +
                           " (nothing was removed; check the state database and start again)");
  for (auto& rec : *records) {
    if (!rec.persistent) {
      // Its processes and tmpfs died with its server; another server's
      // live sandbox on the same state dir is left alone.
      if (!identity_alive(rec.server)) (void)store_->remove(rec.id);
      continue;
    }
    if (rec.status == store::SandboxStatus::kRunning) {
      rec.status = store::SandboxStatus::kStopped;
      rec.memory_saved = false;
      (void)store_->set_status(rec.id, rec.status, false);
    } else if (rec.status == store::SandboxStatus::kPaused && rec.memory_saved &&
               !backend_.checkpoint_support().ok()) {
      rec.memory_saved = false;  // this host cannot restore it
    }
    kept.insert(rec.id);
    std::lock_guard lock(mu_);
    dormant_[rec.id] = rec;
  }
  // Storage no record names: a create or close cut short by a crash.
  for (const auto& id : backend_.list_storage())
    if (!kept.count(id)) {
      spdlog::info("removing storage {}: no sandbox record names it", id);
      if (auto s = backend_.remove_storage(id); !s.ok())
        spdlog::warn("removing storage {}: {}", id, s.error().message());
    }
  if (!kept.empty()) spdlog::info("{} persistent sandbox(es) kept from the last run", kept.size());
  return ok_status();
}

Result<PauseOutcome> SandboxManager::pause(const std::string& id_or_name, const std::string& owner,
                                           PauseMode mode) {
  auto [e, dormant] = find_any(id_or_name, owner);
  if (!e) {
    if (!dormant) return get(id_or_name, owner).take_error();  // the usual not-found text
    if (dormant->status == store::SandboxStatus::kPaused)
      return PauseOutcome{"stop", dormant->memory_saved, "it was already paused"};
    return Error::make(ErrorCode::kFailedPrecondition,
                       "sandbox '" + id_or_name +
                           "' is stopped (its server restarted): nothing runs in it to pause");
  }
  if (mode == PauseMode::kAuto) mode = e->persistent() ? PauseMode::kStop : PauseMode::kFreeze;
  if (mode == PauseMode::kStop && !e->persistent())
    return Error::make(
        ErrorCode::kInvalidArgument,
        "an ephemeral sandbox's files live in memory, so it can only pause with mode "
        "\"freeze\" (its processes stop, memory kept); create it with persistent: true "
        "to pause it to disk");
  {
    // Checked and claimed in one step: a call that begins after this sees
    // the sandbox paused (frozen is set before the processes stop).
    std::lock_guard lock(mu_);
    if (e->frozen()) return PauseOutcome{"freeze", true, "it was already paused"};
    if (e->active_uses() > 0)
      return Error::make(
          ErrorCode::kFailedPrecondition,
          "sandbox '" + id_or_name + "' is running a call; pause it when the call ends");
    e->set_frozen(true);
    if (mode == PauseMode::kStop) by_id_.erase(e->id());
  }
  if (mode == PauseMode::kFreeze) {
    if (auto s = e->sandbox().freeze(); !s.ok()) {
      e->set_frozen(false);
      return s.take_error();
    }
    // memory_saved stays false in the record: a frozen sandbox's memory is
    // in this server's processes, which a restart does not bring back.
    if (e->persistent()) (void)store_->set_status(e->id(), store::SandboxStatus::kPaused, false);
    changed(e->id(), e->owner());
    return PauseOutcome{"freeze", true,
                        "frozen in memory: the sandbox keeps its memory while paused, "
                        "and a server restart loses it (the files stay)"};
  }
  // Stop: the processes end, the files stay on disk.
  admission_.notify();
  std::string why = "the memory state was lost: ";
  auto support = backend_.checkpoint_support();
  why += support.ok() ? "this sandbox was stopped without a checkpoint" : support.error().message();
  e->set_frozen(false);  // not frozen: released (stop_persistent would thaw it)
  stop_persistent(*e, store::SandboxStatus::kPaused);
  return PauseOutcome{"stop", false,
                      why + "; its files are kept and resume_sandbox starts it again"};
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::resume(const std::string& id_or_name,
                                                             const std::string& owner) {
  auto [e, rec] = find_any(id_or_name, owner);
  if (e) {
    if (e->frozen()) {
      if (auto s = e->sandbox().thaw(); !s.ok()) return s.take_error();
      e->set_frozen(false);
      e->touch();
      if (e->persistent()) (void)store_->set_status(e->id(), store::SandboxStatus::kRunning, false);
      changed(e->id(), e->owner());
    }
    return e;
  }
  if (!rec) return get(id_or_name, owner);  // the usual not-found text
  return wake(*rec, /*state_lost=*/true);
}

std::vector<SandboxListing> SandboxManager::list_all(const std::string& owner) const {
  std::vector<SandboxListing> out;
  for (auto& e : list(owner)) out.push_back({e, std::nullopt});
  std::lock_guard lock(mu_);
  for (const auto& [_, r] : dormant_)
    if (r.owner == owner) out.push_back({nullptr, r});
  return out;
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::fork(const std::string& id_or_name,
                                                           const std::string& owner,
                                                           const std::string& name,
                                                           const FileCopier& copy_files) {
  auto [live, rec] = find_any(id_or_name, owner);
  if (!live && !rec) return get(id_or_name, owner).take_error();
  CreateRequest req;
  req.name = name;
  req.owner = owner;
  if (live) {
    req.language = live->language();
    req.ttl = live->ttl();
    req.ttl_action = live->ttl_action();
    req.spec = live->spec_options();
  } else {
    auto o = spec_from_json(rec->spec_json);
    if (!o.ok()) return o.take_error();
    req.language = rec->language;
    req.ttl = rec->ttl;
    req.ttl_action = rec->ttl_action;
    req.spec = *o;
  }
  const bool persistent = req.spec.persistence == sandbox::Persistence::kPersistent;
  if (!persistent) {
    // Its files are read through its own processes: a frozen one would
    // hold every read until its timeout.
    if (live->frozen())
      return Error::make(ErrorCode::kFailedPrecondition,
                         "sandbox '" + id_or_name + "' is paused: resume_sandbox it, then fork it");
    auto child = create(req);
    if (!child.ok()) return child;
    EntryUse from(live), to(*child);
    if (auto s = copy_files(from->sandbox(), to->sandbox()); !s.ok()) {
      (void)close((*child)->id(), owner);
      return Error::make(s.error().code, "copying the files: " + s.error().message());
    }
    return child;
  }
  // Persistent: the backend copies the storage (copy-on-write where it can),
  // then the fork starts on its copy like a stopped sandbox.
  store::SandboxRecord r;
  {
    std::lock_guard lock(mu_);
    r.id = new_id();
    while (by_id_.count(r.id) || dormant_.count(r.id)) r.id = new_id();
    for (const auto& [_, e] : by_id_)
      if (!name.empty() && e->owner() == owner && e->name() == name)
        return Error::make(ErrorCode::kAlreadyExists,
                           "a sandbox named '" + name + "' already exists; pick another name");
    for (const auto& [_, d] : dormant_)
      if (!name.empty() && d.owner == owner && d.name == name)
        return Error::make(ErrorCode::kAlreadyExists,
                           "a sandbox named '" + name + "' already exists; pick another name");
  }
  const std::string from_id = live ? live->id() : rec->id;
  sandbox::SpecOptions o = req.spec;
  o.storage_id = r.id;
  r.name = name.empty() ? r.id : name;
  r.owner = owner;
  r.language = req.language;
  r.image = o.image;
  r.persistent = true;
  r.created_at = r.last_used_at = std::chrono::system_clock::now();
  r.ttl = req.ttl.value_or(options_.default_ttl);
  r.ttl_action = req.ttl_action;
  r.status = store::SandboxStatus::kStopped;
  r.spec_json = spec_to_json(o);
  r.server = options_.server_identity;
  // The copy before the record: a crash between them leaves storage no
  // record names, which the next start removes (the call never answered,
  // so nobody knows the fork's id).
  const auto t0 = std::chrono::steady_clock::now();
  if (auto s = backend_.copy_storage(from_id, r.id); !s.ok()) return s.take_error();
  const auto t1 = std::chrono::steady_clock::now();
  if (auto s = store_->put(r); !s.ok()) {
    (void)backend_.remove_storage(r.id);
    return s.take_error();
  }
  for (const auto& p : store_->packages(from_id)) (void)store_->put_package(r.id, p);
  {
    std::lock_guard lock(mu_);
    dormant_[r.id] = r;
  }
  // Its processes start fresh: nothing to report as lost.
  auto woken = wake(r, /*state_lost=*/false);
  using ms = std::chrono::duration<double, std::milli>;
  spdlog::debug("fork {} -> {}: storage copied in {:.1f} ms, started in {:.1f} ms", from_id, r.id,
                ms(t1 - t0).count(), ms(std::chrono::steady_clock::now() - t1).count());
  if (!woken.ok())
    return Error::make(
        woken.error().code,
        "the fork " + r.id +
            " was made (its files are copied) but could not start: " + woken.error().message() +
            "; it is listed as stopped: resume_sandbox starts it, close_sandbox "
            "deletes it");
  return woken;
}

}  // namespace sandcastle::service
