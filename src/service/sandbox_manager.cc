#include "service/sandbox_manager.h"

#include <spdlog/spdlog.h>
#include <sys/random.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/metrics.h"
#include "service/spec_record.h"

namespace sandcastle::service {

const char* package_state_name(PackageState s) {
  switch (s) {
    case PackageState::kInstalling: return "installing";
    case PackageState::kSuccess: return "success";
    case PackageState::kFailed: return "failed";
  }
  return "unknown";
}

SandboxEntry::SandboxEntry(std::string id, std::string name, std::string language,
                           std::string owner, std::chrono::seconds ttl,
                           std::unique_ptr<sandbox::Sandbox> sb)
    : id_(std::move(id)),
      name_(std::move(name)),
      language_(std::move(language)),
      owner_(std::move(owner)),
      ttl_(ttl),
      created_at_(std::chrono::system_clock::now()),
      sandbox_(std::move(sb)),
      last_used_steady_(std::chrono::steady_clock::now()),
      last_used_(created_at_) {}

SandboxEntry::SandboxEntry(const store::SandboxRecord& record, std::unique_ptr<sandbox::Sandbox> sb)
    : id_(record.id),
      name_(record.name),
      language_(record.language),
      owner_(record.owner),
      ttl_(record.ttl),
      created_at_(record.created_at),
      sandbox_(std::move(sb)),
      last_used_steady_(std::chrono::steady_clock::now()),
      last_used_(std::chrono::system_clock::now()),
      ttl_action_(record.ttl_action) {}

void SandboxEntry::on_package(std::function<void(const PackageRecord&)> fn) {
  std::lock_guard lock(mu_);
  on_package_ = std::move(fn);
}

void SandboxEntry::touch() {
  std::lock_guard lock(mu_);
  last_used_steady_ = std::chrono::steady_clock::now();
  last_used_ = std::chrono::system_clock::now();
}

std::chrono::steady_clock::time_point SandboxEntry::last_used_steady() const {
  std::lock_guard lock(mu_);
  return last_used_steady_;
}

std::chrono::system_clock::time_point SandboxEntry::last_used() const {
  std::lock_guard lock(mu_);
  return last_used_;
}

void SandboxEntry::begin_use() {
  std::lock_guard lock(mu_);
  ++active_uses_;
  ++uses_begun_;
}

void SandboxEntry::end_use() {
  std::lock_guard lock(mu_);
  --active_uses_;
  last_used_steady_ = std::chrono::steady_clock::now();
  last_used_ = std::chrono::system_clock::now();
}

int SandboxEntry::active_uses() const {
  std::lock_guard lock(mu_);
  return active_uses_;
}

SandboxEntry::UseCounts SandboxEntry::use_counts() const {
  std::lock_guard lock(mu_);
  return {uses_begun_, active_uses_};
}

void SandboxEntry::keep_listing(WatchedSnapshot files, std::uint64_t uses) {
  std::lock_guard lock(mu_);
  listing_.emplace(std::move(files), uses);
}

std::optional<WatchedSnapshot> SandboxEntry::take_listing(std::uint64_t uses_now) {
  std::lock_guard lock(mu_);
  std::optional<WatchedSnapshot> out;
  if (listing_ && listing_->second + 1 == uses_now) out = std::move(listing_->first);
  listing_.reset();
  return out;
}

void SandboxEntry::set_package(PackageRecord rec) {
  std::function<void(const PackageRecord&)> hook;
  {
    std::lock_guard lock(mu_);
    rec.updated = std::chrono::system_clock::now();
    packages_[rec.name] = rec;
    hook = on_package_;
  }
  if (hook) hook(rec);
}

std::shared_ptr<void> SandboxEntry::attachment(const std::function<std::shared_ptr<void>()>& make) {
  std::lock_guard lock(mu_);
  if (!attachment_) attachment_ = make();
  return attachment_;
}

std::shared_ptr<void> SandboxEntry::attachment_if_any() const {
  std::lock_guard lock(mu_);
  return attachment_;
}

void SandboxEntry::set_network(NetworkHandle handle) {
  std::lock_guard lock(mu_);
  network_ = std::move(handle);
}

std::shared_ptr<net::Session> SandboxEntry::network() const {
  std::lock_guard lock(mu_);
  return network_.session;
}

std::shared_ptr<FullNetwork> SandboxEntry::full_network() const {
  std::lock_guard lock(mu_);
  return network_.full;
}

void SandboxEntry::drop_network() {
  NetworkHandle gone;
  {
    std::lock_guard lock(mu_);
    gone = std::move(network_);
  }
  // Destroyed outside the lock: the attachment waits for the proxy loop.
}

sandbox::SpecOptions SandboxEntry::spec_options() const {
  sandbox::SpecOptions o = spec().options();
  if (auto session = network()) {
    const auto policy = session->policy();
    o.network_allow.clear();
    o.network_deny.clear();
    for (const auto& r : policy->allow) o.network_allow.push_back(r.to_string());
    for (const auto& r : policy->deny) o.network_deny.push_back(r.to_string());
  }
  return o;
}

std::optional<PackageRecord> SandboxEntry::package(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = packages_.find(name);
  if (it == packages_.end()) return std::nullopt;
  return it->second;
}

std::vector<PackageRecord> SandboxEntry::packages() const {
  std::lock_guard lock(mu_);
  std::vector<PackageRecord> out;
  for (const auto& [_, p] : packages_) out.push_back(p);
  return out;
}

EntryUse::EntryUse(std::shared_ptr<SandboxEntry> e) : e_(std::move(e)) {
  e_->begin_use();
}
EntryUse::~EntryUse() {
  e_->end_use();
}

namespace {
void count_created() {
  metrics::registry().counter(metrics::name::kSandboxesCreated, "sandboxes created").inc();
}
// Every destruction goes through here, so the destroyed count is exact.
// A frozen sandbox is thawed first: on cgroup v1 a frozen task takes its
// SIGKILL only once thawed.
// Its network goes first: the listeners and tunnels hold the sandbox's
// network namespace.
void destroy_counted(SandboxEntry& e, const std::string& id, bool frozen = false) {
  e.drop_network();
  sandbox::Sandbox& sb = e.sandbox();
  if (frozen) (void)sb.thaw();
  if (auto s = sb.destroy(); !s.ok())
    spdlog::warn("destroying sandbox {}: {}", id, s.error().message());
  metrics::registry().counter(metrics::name::kSandboxesDestroyed, "sandboxes destroyed").inc();
}
}  // namespace

SandboxManager::SandboxManager(sandbox::Backend& backend, ManagerOptions options,
                               store::SandboxStore* store)
    : backend_(backend),
      options_(options),
      store_(store ? store : &own_store_),
      admission_(options.max_queued_runs) {}

store::SandboxRecord record_of(const SandboxEntry& e, const std::string& server) {
  store::SandboxRecord r;
  r.server = server;
  r.id = e.id();
  r.name = e.name();
  r.owner = e.owner();
  r.language = e.language();
  r.image = e.spec().image();
  r.persistent = e.persistent();
  r.created_at = e.created_at();
  r.last_used_at = e.last_used();
  r.ttl = e.ttl();
  r.ttl_action = e.ttl_action();
  r.status = e.frozen() ? store::SandboxStatus::kPaused : store::SandboxStatus::kRunning;
  r.spec_json = spec_to_json(e.spec_options());
  return r;
}

Status SandboxManager::save_record(const SandboxEntry& e) {
  if (!e.recorded()) return {};
  return store_->put(record_of(e, options_.server_identity));
}

SandboxManager::~SandboxManager() {
  shutdown();
}

void SandboxManager::start() {
  std::lock_guard lock(mu_);
  if (!reaper_thread_.joinable()) reaper_thread_ = std::thread([this] { reaper_loop(); });
}

void SandboxManager::shutdown() {
  std::map<std::string, std::shared_ptr<SandboxEntry>> live;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    live.swap(by_id_);
    for (const auto& [id, e] : live)
      if (!e->persistent() && e->recorded()) (void)store_->remove(id);
  }
  cv_.notify_all();
  admission_.notify();  // waiting one-shots learn the server is stopping
  if (reaper_thread_.joinable()) reaper_thread_.join();
  for (auto& [id, e] : live) {
    if (e->persistent())
      stop_persistent(*e, store::SandboxStatus::kStopped);
    else
      destroy_counted(*e, id, e->frozen());
  }
  std::deque<std::shared_ptr<SandboxEntry>> retiring;
  {
    std::lock_guard lock(mu_);
    retiring.swap(retiring_);
  }
  for (auto& e : retiring) destroy_counted(*e, e->id());
}

std::string SandboxManager::new_id() const {
  unsigned char bytes[6];
  if (getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes)) {
    auto t = std::chrono::steady_clock::now().time_since_epoch().count();
    for (size_t i = 0; i < sizeof bytes; ++i) bytes[i] = static_cast<unsigned char>(t >> (8 * i));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "sb-";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::string SandboxManager::cap_text() const {
  return "the server already runs its maximum of " + std::to_string(options_.max_sandboxes) +
         " sandboxes";
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::create(const CreateRequest& req) {
  return create_impl(req, /*reserved=*/false);
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::create_when_free(
    const CreateRequest& req, std::chrono::steady_clock::time_point deadline, CancelToken* cancel,
    const AdmissionQueue::OnQueued& on_queued) {
  if (auto spec = sandbox::SandboxSpec::create(req.spec); !spec.ok()) return spec.take_error();
  using Take = AdmissionQueue::Take;
  AdmissionQueue::Request ar;
  ar.caller = req.owner;
  ar.deadline = deadline;
  ar.cancel = cancel;
  ar.on_queued = on_queued;
  // Reserves a slot under the cap and the owner's quota; when stopping, lets
  // the waiter through to create_impl's "shutting down" error.
  ar.try_take = [this, &req] {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      if (by_id_.size() + creating_ >= options_.max_sandboxes) return Take::kServerFull;
      if (options_.max_per_owner > 0 && owned_locked(req.owner) >= options_.max_per_owner)
        return Take::kCallerFull;
    }
    ++creating_;
    ++reserved_by_owner_[req.owner];
    return Take::kTaken;
  };
  ar.describe_full = [this](Take why) {
    return why == Take::kCallerFull ? "you already have " + std::to_string(options_.max_per_owner) +
                                          " live sandboxes, the quota per user"
                                    : cap_text();
  };
  if (auto s = admission_.admit(ar); !s.ok()) return s.take_error();
  return create_impl(req, /*reserved=*/true);
}

size_t SandboxManager::owned_locked(const std::string& owner) const {
  size_t mine = static_cast<size_t>(std::count_if(
      by_id_.begin(), by_id_.end(), [&](const auto& kv) { return kv.second->owner() == owner; }));
  if (auto it = reserved_by_owner_.find(owner); it != reserved_by_owner_.end()) mine += it->second;
  return mine;
}

void SandboxManager::release_reservation_locked(const std::string& owner) {
  --creating_;
  if (auto it = reserved_by_owner_.find(owner); it != reserved_by_owner_.end() && --it->second == 0)
    reserved_by_owner_.erase(it);
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::create_impl(const CreateRequest& req,
                                                                  bool reserved) {
  // A persistent sandbox's storage is named after its id, which is chosen
  // below: checked with a stand-in name first.
  sandbox::SpecOptions checked = req.spec;
  if (checked.persistence == sandbox::Persistence::kPersistent && checked.storage_id.empty())
    checked.storage_id = "pending";
  auto spec = sandbox::SandboxSpec::create(checked);
  auto refuse = [&](Error e) -> Result<std::shared_ptr<SandboxEntry>> {
    if (reserved) {
      {
        std::lock_guard lock(mu_);
        release_reservation_locked(req.owner);
      }
      admission_.notify();
    }
    return e;
  };
  if (!spec.ok()) return refuse(spec.take_error());
  const bool persistent = req.spec.persistence == sandbox::Persistence::kPersistent;
  if (persistent && !options_.persistent_refusal.empty())
    return refuse(Error::make(ErrorCode::kUnavailable, options_.persistent_refusal));
  if (persistent && req.owner.rfind("session:", 0) == 0)
    return refuse(Error::make(ErrorCode::kInvalidArgument,
                              "a persistent sandbox outlives its session, but without an API key "
                              "this session is its only owner and nobody could reach it again: "
                              "connect with an API key (`sandcastle keys create`, then "
                              "'Authorization: Bearer <key>') or over stdio"));
  std::string id;
  {
    std::unique_lock lock(mu_);
    if (stopping_) {
      lock.unlock();
      return refuse(Error::make(ErrorCode::kUnavailable, "the server is shutting down"));
    }
    if (!reserved && by_id_.size() + creating_ >= options_.max_sandboxes)
      return Error::make(ErrorCode::kResourceExhausted,
                         cap_text() + "; close one you no longer need (close_sandbox) and retry");
    if (!reserved && options_.max_per_owner > 0) {
      size_t mine = owned_locked(req.owner);
      if (mine >= options_.max_per_owner)
        return Error::make(ErrorCode::kResourceExhausted,
                           "you already have " + std::to_string(mine) +
                               " live sandboxes, the quota per user; close one you no longer need "
                               "(close_sandbox) and retry");
    }
    if (!req.name.empty()) {
      std::string other;
      for (const auto& [_, e] : by_id_)
        if (e->owner() == req.owner && e->name() == req.name) other = e->id();
      for (const auto& [_, r] : dormant_)
        if (r.owner == req.owner && r.name == req.name) other = r.id;
      if (!other.empty()) {
        lock.unlock();
        return refuse(Error::make(ErrorCode::kAlreadyExists,
                                  "a sandbox named '" + req.name + "' already exists (" + other +
                                      "); use it, or pick another name"));
      }
    }
    id = new_id();
    while (by_id_.count(id) || dormant_.count(id)) id = new_id();
    if (!reserved) {
      ++creating_;
      ++reserved_by_owner_[req.owner];
    }
  }
  if (persistent) {
    // Its storage is named after it, so a restart finds it.
    sandbox::SpecOptions o = req.spec;
    o.storage_id = id;
    spec = sandbox::SandboxSpec::create(std::move(o));
  }
  // The backend hands out a warm sandbox only for the spec it was made for.
  auto sb =
      spec.ok() ? backend_.create(*spec) : Result<std::unique_ptr<sandbox::Sandbox>>(spec.error());
  NetworkHandle network;
  if (sb.ok()) {
    if (auto n = attach_network(**sb, options_.proxies, id); n.ok()) {
      network = std::move(*n);
    } else {
      (void)(*sb)->destroy();
      sb = n.take_error();
    }
  }
  std::unique_lock lock(mu_);
  release_reservation_locked(req.owner);
  if (!sb.ok()) {
    lock.unlock();
    admission_.notify();
    // Storage the backend may have made for it before failing: nobody
    // will ever name this id again.
    if (persistent) (void)backend_.remove_storage(id);
    return sb.take_error();
  }
  auto entry =
      std::make_shared<SandboxEntry>(id, req.name.empty() ? id : req.name, req.language, req.owner,
                                     req.ttl.value_or(options_.default_ttl), std::move(sb).value());
  entry->set_ttl_action(req.ttl_action);
  entry->set_network(std::move(network));
  insert_locked(entry);
  if (persistent) {
    if (auto s = store_->put(record_of(*entry, options_.server_identity)); !s.ok()) {
      // A persistent sandbox the store does not know would be lost at the
      // next restart: refuse it now rather than later.
      by_id_.erase(id);
      lock.unlock();
      admission_.notify();
      destroy_counted(*entry, id);
      return Error::make(s.error().code,
                         "recording the persistent sandbox: " + s.error().message());
    }
  } else if (!req.one_shot) {
    (void)store_->put(record_of(*entry, options_.server_identity));
  }
  entry->set_recorded(persistent || !req.one_shot);
  if (entry->recorded()) changed(id, req.owner, entry);
  count_created();
  return entry;
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::find_live_locked(
    const std::string& id_or_name, const std::string& owner) const {
  auto it = by_id_.find(id_or_name);
  if (it != by_id_.end() && it->second->owner() == owner) return it->second;
  for (const auto& [_, e] : by_id_)
    if (e->owner() == owner && e->name() == id_or_name) return e;
  return Error::make(ErrorCode::kNotFound, "");
}

Result<std::shared_ptr<SandboxEntry>> SandboxManager::get(const std::string& id_or_name,
                                                          const std::string& owner) {
  std::unique_lock lock(mu_);
  // A sandbox whose processes died since its last call (one poll of its
  // init's pidfd) is dealt with before the call starts: a persistent one
  // comes back on its files below, so the call runs there, once. Twice at
  // most: a sandbox woken dead (its zygote killed again) is not chased.
  for (int tries = 0; tries < 2; ++tries) {
    auto live = find_live_locked(id_or_name, owner);
    if (!live.ok()) break;
    if ((*live)->frozen())
      return Error::make(ErrorCode::kFailedPrecondition,
                         "sandbox '" + id_or_name + "' is paused: call resume_sandbox first");
    if (tries == 1) return live;
    lock.unlock();  // a sandbox's own lock is never taken under mu_
    if ((*live)->sandbox().alive()) return live;
    bury_dead(*live);
    lock.lock();
  }
  if (auto rec = find_dormant_locked(id_or_name, owner)) {
    if (rec->status == store::SandboxStatus::kPaused)
      return Error::make(ErrorCode::kFailedPrecondition,
                         "sandbox '" + id_or_name + "' is paused: call resume_sandbox first");
    lock.unlock();
    return wake(*rec, /*state_lost=*/true);
  }
  if (auto why = ended_.reason(id_or_name))
    return Error::make(ErrorCode::kNotFound,
                       "sandbox '" + id_or_name + "' no longer exists: " + *why);
  return Error::make(ErrorCode::kNotFound,
                     "no sandbox '" + id_or_name +
                         "' (it may have been closed, or reaped after its idle TTL); call "
                         "list_sandboxes to see yours, or create_sandbox for a new one");
}

namespace {
constexpr int kCloseAttempts = 4;
}  // namespace

Status SandboxManager::retry_close(const std::string& id, const std::string& owner, int attempt) {
  if (attempt + 1 >= kCloseAttempts)
    return Error::make(ErrorCode::kUnavailable, "sandbox '" + id +
                                                    "' kept changing state while it was being "
                                                    "closed; call close_sandbox again");
  return close_attempt(id, owner, attempt + 1);
}

Status SandboxManager::close_attempt(const std::string& id_or_name, const std::string& owner,
                                     int attempt) {
  auto [live, rec] = find_any(id_or_name, owner);
  const std::string dormant = rec ? rec->id : std::string();
  if (!dormant.empty()) {
    // Not running: its files are all there is to delete. No wake of it
    // runs meanwhile (wake_mu_), or the wake would make it again, empty.
    std::unique_lock wake_lock(wake_mu_);
    bool still = false;
    {
      std::lock_guard lock(mu_);
      still = dormant_.erase(dormant) > 0;
    }
    if (!still) {  // woken before this call got here: close it live
      wake_lock.unlock();
      return retry_close(dormant, owner, attempt);
    }
    // The record first: a crash between the two leaves storage no record
    // names, which the next start removes (never a record without files).
    changed(dormant, owner);
    if (auto s = store_->remove(dormant); !s.ok()) return s;
    return backend_.remove_storage(dormant);
  }
  if (live && live->frozen())
    (void)live->sandbox().thaw();  // a frozen process ignores SIGKILL until thawed on v1
  auto entry = live ? Result<std::shared_ptr<SandboxEntry>>(live) : get(id_or_name, owner);
  if (!entry.ok()) return entry.take_error();
  bool moved = false;
  {
    std::lock_guard lock(mu_);
    // Only the entry looked up: if it left meanwhile (its processes died and
    // it was stopped, or it was paused) or another took its id (a wake),
    // the close starts over from the lookup, which finds what is there now.
    auto it = by_id_.find((*entry)->id());
    moved = it == by_id_.end() || it->second != *entry;
    if (!moved) {
      by_id_.erase(it);
      if ((*entry)->recorded()) (void)store_->remove((*entry)->id());
      changed((*entry)->id(), (*entry)->owner());
    }
  }
  if (moved) return retry_close((*entry)->id(), owner, attempt);
  admission_.notify();
  Status st = (*entry)->sandbox().destroy();
  metrics::registry().counter(metrics::name::kSandboxesDestroyed, "sandboxes destroyed").inc();
  return st;
}

void SandboxManager::retire(const std::string& id, const std::string& owner) {
  std::shared_ptr<SandboxEntry> entry;
  {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end() || it->second->owner() != owner) return;
    entry = it->second;
    by_id_.erase(it);
    if (entry->recorded()) (void)store_->remove(id);
    if (reaper_thread_.joinable() && !stopping_) {
      retiring_.push_back(std::move(entry));
      cv_.notify_all();
      entry = nullptr;
    }
  }
  admission_.notify();
  if (!entry) return;
  destroy_counted(*entry, id);  // no background thread: destroy here
}

size_t SandboxManager::close_owned_by(const std::string& owner) {
  std::vector<std::shared_ptr<SandboxEntry>> mine;
  {
    std::lock_guard lock(mu_);
    for (auto it = by_id_.begin(); it != by_id_.end();) {
      if (it->second->owner() == owner) {
        mine.push_back(it->second);
        if (it->second->recorded()) (void)store_->remove(it->first);
        changed(it->first, owner);
        it = by_id_.erase(it);
      } else {
        ++it;
      }
    }
  }
  // Only keyless sessions' sandboxes go with their owner (main.cc, on_owner_gone).
  if (owner.rfind("session:", 0) == 0)
    for (auto& e : mine) ended_.remember(e->id(), kEndedWithSession);
  if (!mine.empty()) admission_.notify();
  for (auto& e : mine) destroy_counted(*e, e->id(), e->frozen());
  return mine.size();
}

std::vector<std::shared_ptr<SandboxEntry>> SandboxManager::list(const std::string& owner) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<SandboxEntry>> out;
  for (const auto& [_, e] : by_id_)
    if (e->owner() == owner) out.push_back(e);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->created_at() < b->created_at(); });
  return out;
}

void SandboxManager::set_change_listener(ChangeListener fn) {
  std::lock_guard l(listener_mu_);
  listener_ = std::move(fn);
}

void SandboxManager::changed(const std::string& id, const std::string& owner,
                             std::shared_ptr<const SandboxEntry> created) const {
  std::lock_guard l(listener_mu_);
  if (listener_) listener_(id, owner, std::move(created));
}

std::vector<std::shared_ptr<SandboxEntry>> SandboxManager::list_every(
    const std::optional<std::string>& owner) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<SandboxEntry>> out;
  for (const auto& [_, e] : by_id_)
    if (!owner || e->owner() == *owner) out.push_back(e);
  return out;
}

size_t SandboxManager::live_count() const {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

size_t SandboxManager::pool_ready() const {
  return backend_.warm_ready();
}

size_t SandboxManager::reap_expired() {
  std::vector<std::shared_ptr<SandboxEntry>> expired, to_pause, to_stop, idle_now;
  // Died without a close: an ephemeral one frees its slot now, a persistent
  // one is listed as stopped (a call in progress on one finds out itself,
  // ended_during_call). Looked at outside mu_, like every sandbox's lock.
  {
    std::lock_guard lock(mu_);
    for (const auto& [_, e] : by_id_)
      if (e->active_uses() == 0) idle_now.push_back(e);
  }
  size_t dead = 0;
  for (auto& e : idle_now)
    if (!e->sandbox().alive() && bury_dead(e)) ++dead;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    for (auto it = by_id_.begin(); it != by_id_.end();) {
      auto& e = it->second;
      const auto idle = now - e->last_used_steady();
      if (e->active_uses() > 0 || idle < e->ttl()) {
        ++it;
        continue;
      }
      if (!e->frozen() && e->ttl_action() == "pause") {
        to_pause.push_back(e);
        ++it;
        continue;
      }
      // A frozen sandbox holds its memory: idle for a second TTL, a
      // persistent one goes to disk and an ephemeral one is destroyed.
      if (e->frozen() && idle < 2 * e->ttl()) {
        ++it;
        continue;
      }
      if (e->frozen() && e->persistent()) {
        to_stop.push_back(e);
        it = by_id_.erase(it);
        continue;
      }
      expired.push_back(e);
      if (e->recorded()) (void)store_->remove(it->first);
      changed(it->first, e->owner());
      it = by_id_.erase(it);
    }
  }
  for (auto& e : to_pause) {
    auto r = pause(e->id(), e->owner(), PauseMode::kAuto);
    if (r.ok()) {
      spdlog::info("sandbox {} idle for {} s: paused ({})", e->id(), e->ttl().count(), r->mode);
    } else {
      e->touch();  // tried again after another TTL, not at every reap
      spdlog::warn("sandbox {} idle for {} s: pausing failed: {}", e->id(), e->ttl().count(),
                   r.error().message());
    }
  }
  for (auto& e : to_stop) {
    spdlog::info("sandbox {} frozen and idle for another {} s: stopped to disk", e->id(),
                 e->ttl().count());
    stop_persistent(*e, store::SandboxStatus::kPaused);
  }
  if (!expired.empty() || !to_stop.empty()) admission_.notify();
  for (auto& e : expired) {
    spdlog::info("sandbox {} idle for {} s: reaping it", e->id(), e->ttl().count());
    ended_.remember(
        e->id(), e->frozen()
                     ? "it was paused (frozen) and then idle for another TTL of " +
                           std::to_string(e->ttl().count()) +
                           " s, and was destroyed; a persistent sandbox would have gone to disk. "
                           "Call create_sandbox for a new one"
                     : "it was idle for its TTL of " + std::to_string(e->ttl().count()) +
                           " s and was destroyed (create_sandbox takes a longer ttl_s). Call "
                           "create_sandbox for a new one");
    destroy_counted(*e, e->id(), e->frozen());
  }
  return expired.size() + to_pause.size() + to_stop.size() + dead;
}

void SandboxManager::tend_networks() {
  std::vector<std::pair<std::shared_ptr<FullNetwork>, std::shared_ptr<net::Session>>> full;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, e] : by_id_)
      if (auto f = e->full_network())
        if (auto session = e->network()) full.emplace_back(std::move(f), std::move(session));
  }
  if (full.empty()) return;
  // Read here, not the proxies' list (refreshed every 60 s): a new address
  // on the host is refused from the next tick on.
  auto hosts = net::host_addresses();
  if (!hosts.ok()) spdlog::warn("network: the host's addresses: {}", hosts.error().message());
  for (auto& [f, session] : full) f->tend(*session, hosts.ok() ? &*hosts : nullptr);
}

void SandboxManager::reaper_loop() {
  std::unique_lock lock(mu_);
  auto next_reap = std::chrono::steady_clock::now() + options_.reap_interval;
  while (!stopping_) {
    cv_.wait_until(lock, next_reap, [this] { return stopping_ || !retiring_.empty(); });
    while (!retiring_.empty()) {
      auto e = std::move(retiring_.front());
      retiring_.pop_front();
      lock.unlock();
      destroy_counted(*e, e->id());
      lock.lock();
    }
    if (stopping_) break;
    if (std::chrono::steady_clock::now() >= next_reap) {
      lock.unlock();
      reap_expired();
      tend_networks();
      lock.lock();
      next_reap = std::chrono::steady_clock::now() + options_.reap_interval;
    }
  }
}

}  // namespace sandcastle::service
