#include "sandbox/engine/multi_engine.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <cctype>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

namespace sandcastle::sandbox::engine {

namespace {
using Clock = std::chrono::steady_clock;  // as the engine's other files declare it
}  // namespace

// One engine of the fleet. Fields under Fleet::mu unless said otherwise.
struct Slot {
  EngineSpec spec;
  // Set once (when the engine first answers), never reset while the fleet
  // lives: a pointer read under the lock stays valid after it.
  std::unique_ptr<EngineBackend> backend;
  bool local = false;
  bool up = false;
  std::string why = "not checked yet";
  std::size_t live = 0;      // sandboxes placed here, not destroyed, not lost
  std::size_t reserved = 0;  // creates under way here
  // Bumped each time the engine goes down: a sandbox made in an earlier
  // epoch is lost. Read without the lock by the sandboxes' alive().
  std::atomic<std::uint64_t> epoch{0};
  std::map<std::string, std::string> sandboxes;  // sandbox id -> container id
  std::vector<std::string> lost_containers;      // removed when it answers again
  struct Seen {
    bool present = false;
    Clock::time_point at;
  };
  std::map<std::string, Seen> images;
  std::mutex check_mu;  // one health check of this engine at a time
};

struct Fleet {
  MultiEngineOptions options;
  mutable std::mutex mu;
  mutable std::condition_variable state_cv;  // an engine went up or down
  std::condition_variable wake_cv;           // the health thread
  bool wake = false;
  bool stopping = false;
  std::vector<std::unique_ptr<Slot>> slots;

  // One health check of engine i (a ping, or a first start); true if it
  // answers. Marks it down or brings it back.
  bool check(std::size_t i);
  void mark_down_locked(Slot& s, const std::string& why);
  void poke() {
    {
      std::lock_guard l(mu);
      wake = true;
    }
    wake_cv.notify_all();
  }
};

void Fleet::mark_down_locked(Slot& s, const std::string& why) {
  s.why = why;
  if (!s.up) return;
  s.up = false;
  s.epoch.fetch_add(1, std::memory_order_acq_rel);
  spdlog::warn(
      "engine {} does not answer ({}): its {} sandbox(es) are lost; creates go to the others",
      s.spec.name, why, s.sandboxes.size());
  for (auto& [id, cid] : s.sandboxes) s.lost_containers.push_back(cid);
  s.sandboxes.clear();
  s.live = 0;
  s.images.clear();
}

bool Fleet::check(std::size_t i) {
  Slot& s = *slots[i];
  std::lock_guard one(s.check_mu);
  EngineBackend* b = nullptr;
  {
    std::lock_guard l(mu);
    if (stopping) return false;
    b = s.backend.get();
  }
  bool ok = false;
  std::string why;
  if (!b) {
    EngineBackendOptions o;
    o.engine.url = s.spec.url;
    o.engine.tls_dir = s.spec.tls_dir;
    o.engine.connect_timeout = options.ping_timeout;
    o.agent_path = options.agent_path;
    o.pool_size = options.pool_size;
    o.pool_spec = options.pool_spec;
    auto nb = EngineBackend::create(o);
    if (nb.ok()) {
      std::unique_lock l(mu);
      if (stopping) {
        l.unlock();
        (*nb)->shutdown();
        return false;
      }
      s.backend = std::move(*nb);
      s.local = s.backend->client().endpoint().kind == Endpoint::Kind::kUnix;
      b = s.backend.get();
      ok = true;
    } else {
      why = nb.error().message();
    }
  } else {
    CallOptions c;
    c.timeout = options.ping_timeout;
    auto st = b->client().ping(c);
    ok = st.ok();
    if (!ok) why = st.error().message();
  }
  if (!ok) {
    {
      std::lock_guard l(mu);
      mark_down_locked(s, why);
    }
    state_cv.notify_all();
    return false;
  }
  std::vector<std::string> sweep;
  {
    std::lock_guard l(mu);
    if (s.up) return true;
    sweep.swap(s.lost_containers);
  }
  // The containers of its lost sandboxes go before it takes creates again:
  // nothing of theirs outlives the loss.
  std::vector<std::string> kept;
  for (const auto& cid : sweep) {
    CallOptions c;
    c.timeout = std::chrono::seconds(30);
    if (auto st = b->client().container_remove(cid, true, true, c);
        !st.ok() && engine_http_status(st.error()) != 404) {
      spdlog::warn("engine {}: removing lost container {}: {}", s.spec.name, cid.substr(0, 12),
                   st.error().message());
      kept.push_back(cid);
    }
  }
  {
    std::lock_guard l(mu);
    s.up = true;
    s.why.clear();
    s.images.clear();
    s.lost_containers.insert(s.lost_containers.end(), kept.begin(), kept.end());
  }
  spdlog::info("engine {} ({}) answers: it takes sandboxes{}", s.spec.name, s.spec.url,
               sweep.empty() ? "" : " again; its lost sandboxes' containers removed");
  state_cv.notify_all();
  return true;
}

namespace {

// A sandbox on one engine of the fleet: every call goes to the engine's
// own sandbox, unless the engine stopped answering since the sandbox was
// made.
class PlacedSandbox final : public Sandbox {
 public:
  PlacedSandbox(std::shared_ptr<Fleet> fleet, std::size_t slot, std::uint64_t epoch,
                std::unique_ptr<Sandbox> inner)
      : fleet_(std::move(fleet)),
        slot_(slot),
        epoch_(epoch),
        inner_(std::move(inner)),
        engine_(fleet_->slots[slot_]->spec.name) {}
  ~PlacedSandbox() override { (void)destroy(); }

  const std::string& id() const override { return inner_->id(); }
  const SandboxSpec& spec() const override { return inner_->spec(); }
  std::string location() const override { return engine_; }
  std::string lost_reason() const override { return lost() ? lost_error().context : std::string(); }

  Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks = {},
                          const sandbox::CancelToken* cancel = nullptr) override {
    return call([&] { return inner_->exec(req, callbacks, cancel); });
  }
  Result<FileStat> stat(const std::string& path) override {
    return call([&] { return inner_->stat(path); });
  }
  Result<Listing> list(const std::string& path, const ListOptions& options = {}) override {
    return call([&] { return inner_->list(path, options); });
  }
  Result<FileData> read_file(const std::string& path, const ReadRange& range = {}) override {
    return call([&] { return inner_->read_file(path, range); });
  }
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode = 0644,
                    bool parents = false) override {
    return call([&] { return inner_->write_file(path, data, mode, parents); });
  }
  Status mkdir(const std::string& path, bool parents = true) override {
    return call([&] { return inner_->mkdir(path, parents); });
  }
  Status rename(const std::string& from, const std::string& to) override {
    return call([&] { return inner_->rename(from, to); });
  }
  Status remove(const std::string& path, bool recursive = false) override {
    return call([&] { return inner_->remove(path, recursive); });
  }
  Result<Usage> usage() override {
    return call([&] { return inner_->usage(); });
  }
  Result<SavedLayer> save_layer(const std::string& tar_path, const SaveLimits& limits) override {
    return call([&] { return inner_->save_layer(tar_path, limits); });
  }
  bool saves_own_images() const override { return inner_->saves_own_images(); }
  Result<SavedImage> save_image(const std::string& name, const std::string& owner) override {
    return call([&] { return inner_->save_image(name, owner); });
  }
  Status publish_shared(const std::string& name, std::string_view data) override {
    return call([&] { return inner_->publish_shared(name, data); });
  }
  bool has_shared(const std::string& name) const override {
    return !lost() && inner_->has_shared(name);
  }
  Status freeze() override {
    return call([&] { return inner_->freeze(); });
  }
  Status thaw() override {
    return call([&] { return inner_->thaw(); });
  }
  Status persist_changes() override {
    return call([&] { return inner_->persist_changes(); });
  }
  Status checkpoint(const std::string& dir) override {
    return call([&] { return inner_->checkpoint(dir); });
  }
  bool alive(std::chrono::milliseconds grace = {}) const override {
    return !lost() && inner_->alive(grace);
  }

  Status destroy() override {
    if (destroyed_.exchange(true)) return ok_status();
    // The engine's own sandbox goes either way (its stream closed, its
    // container queued for removal); a lost one's container is removed
    // again when the engine answers.
    (void)inner_->destroy();
    std::lock_guard l(fleet_->mu);
    Slot& s = *fleet_->slots[slot_];
    if (s.epoch.load(std::memory_order_acquire) == epoch_ && s.sandboxes.erase(inner_->id()) > 0 &&
        s.live > 0)
      --s.live;
    return ok_status();
  }

 private:
  bool lost() const {
    return fleet_->slots[slot_]->epoch.load(std::memory_order_acquire) != epoch_;
  }
  Error lost_error() const {
    std::string why;
    {
      std::lock_guard l(fleet_->mu);
      why = fleet_->slots[slot_]->why;
    }
    return Error::make(ErrorCode::kUnavailable, "engine " + engine_ + " does not answer" +
                                                    (why.empty() ? "" : " (" + why + ")") +
                                                    ": sandbox " + id() + " on it is lost");
  }

  // The call, unless the sandbox is lost; a call that fails with the
  // sandbox dead makes the engine checked at once, so a dead engine is
  // reported as such and not as one dead sandbox.
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    if (lost()) return lost_error();
    auto r = f();
    if (!r.ok() && !inner_->alive()) {
      if (!fleet_->check(slot_) || lost()) return lost_error();
    }
    return r;
  }

  std::shared_ptr<Fleet> fleet_;
  std::size_t slot_;
  std::uint64_t epoch_;
  std::unique_ptr<Sandbox> inner_;
  std::string engine_;
  std::atomic<bool> destroyed_{false};
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    const auto b = cur.find_first_not_of(" \t");
    const auto e = cur.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(cur.substr(b, e - b + 1));
    cur.clear();
  };
  for (char c : s) {
    if (c == ',' || c == '\n') {
      flush();
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return out;
}

// "name=value" when the part before '=' is a plain name (a URL has "://"
// before any '=').
bool split_named(const std::string& item, std::string* name, std::string* value) {
  const auto eq = item.find('=');
  const auto scheme = item.find("://");
  if (eq == std::string::npos || (scheme != std::string::npos && scheme < eq)) return false;
  *name = item.substr(0, eq);
  *value = item.substr(eq + 1);
  return true;
}

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
      return false;
  return true;
}

}  // namespace

Result<std::vector<EngineSpec>> parse_engine_list(const std::string& engines,
                                                  const std::string& tls, std::size_t capacity) {
  std::vector<EngineSpec> out;
  std::set<std::string> names;
  for (const auto& item : split_list(engines)) {
    EngineSpec e;
    if (!split_named(item, &e.name, &e.url)) {
      e.url = item;
      e.name = "engine" + std::to_string(out.size() + 1);
    }
    if (!valid_name(e.name))
      return Error::make(ErrorCode::kInvalidArgument,
                         "engine name '" + e.name + "': use letters, digits, '-', '_' or '.'");
    if (e.url.empty())
      return Error::make(ErrorCode::kInvalidArgument, "engine '" + e.name + "' has no URL");
    if (!names.insert(e.name).second)
      return Error::make(ErrorCode::kInvalidArgument, "engine name '" + e.name + "' is used twice");
    e.capacity = capacity;
    out.push_back(std::move(e));
  }
  for (const auto& item : split_list(tls)) {
    std::string name, dir;
    if (split_named(item, &name, &dir)) {
      bool found = false;
      for (auto& e : out)
        if (e.name == name) {
          e.tls_dir = dir;
          found = true;
        }
      if (!found)
        return Error::make(ErrorCode::kInvalidArgument,
                           "--engine-tls-dir " + item + ": no engine is named '" + name + "'");
      continue;
    }
    // One directory: every tcp:// engine without one of its own.
    for (auto& e : out)
      if (e.tls_dir.empty() && e.url.rfind("tcp://", 0) == 0) e.tls_dir = item;
  }
  return out;
}

Result<std::unique_ptr<MultiEngineBackend>> MultiEngineBackend::create(
    const MultiEngineOptions& options) {
  if (options.engines.empty())
    return Error::make(ErrorCode::kInvalidArgument, "no engine given (--engine or [[engines]])");
  std::set<std::string> names;
  for (const auto& e : options.engines) {
    if (!valid_name(e.name))
      return Error::make(ErrorCode::kInvalidArgument,
                         "engine name '" + e.name + "': use letters, digits, '-', '_' or '.'");
    if (!names.insert(e.name).second)
      return Error::make(ErrorCode::kInvalidArgument, "engine name '" + e.name + "' is used twice");
    if (auto ep = parse_endpoint(e.url, e.tls_dir); !ep.ok())
      return Error::make(ErrorCode::kInvalidArgument,
                         "engine " + e.name + ": " + ep.error().message());
  }
  std::unique_ptr<MultiEngineBackend> b(new MultiEngineBackend());
  b->fleet_ = std::make_shared<Fleet>();
  b->fleet_->options = options;
  for (const auto& e : options.engines) {
    auto s = std::make_unique<Slot>();
    s->spec = e;
    b->fleet_->slots.push_back(std::move(s));
  }
  // As EngineBackend's: the isolation is each engine's.
  b->caps_.seccomp = true;
  b->caps_.cgroup_limits = true;
  b->caps_.cgroup_version = "engine";
  b->caps_.notes.push_back(
      "isolation is the engines': their runtimes' namespaces and default seccomp profiles, plus "
      "CapDrop ALL, no-new-privileges, a read-only root and no network");
  for (std::size_t i = 0; i < b->fleet_->slots.size(); ++i)
    if (!b->fleet_->check(i))
      spdlog::warn("engine {} ({}) does not answer yet: {}", options.engines[i].name,
                   options.engines[i].url, b->fleet_->slots[i]->why);
  b->health_ = std::thread([raw = b.get()] { raw->health_loop(); });
  return b;
}

MultiEngineBackend::~MultiEngineBackend() {
  shutdown();
}

void MultiEngineBackend::health_loop() {
  Fleet& f = *fleet_;
  std::unique_lock l(f.mu);
  while (!f.stopping) {
    f.wake_cv.wait_for(l, f.options.health_interval, [&] { return f.stopping || f.wake; });
    if (f.stopping) break;
    f.wake = false;
    l.unlock();
    for (std::size_t i = 0; i < f.slots.size(); ++i) (void)f.check(i);
    l.lock();
  }
}

void MultiEngineBackend::check_soon() {
  fleet_->poke();
}

Result<std::unique_ptr<Sandbox>> MultiEngineBackend::create(const SandboxSpec& spec) {
  Fleet& f = *fleet_;
  const std::string& image = spec.image();
  const std::size_t n = f.slots.size();
  std::vector<std::string> reasons(n);
  std::vector<bool> tried(n, false);
  // Each round places on the best engine; an engine that fails the create
  // because it stopped answering is left out of the next round.
  for (std::size_t round = 0; round < n; ++round) {
    std::vector<std::size_t> unknown;  // image presence to ask
    {
      std::lock_guard l(f.mu);
      if (f.stopping)
        return Error::make(ErrorCode::kUnavailable, "the engine backend is shutting down");
      for (std::size_t i = 0; i < n; ++i) {
        Slot& s = *f.slots[i];
        if (tried[i]) continue;
        if (!s.up || !s.backend) continue;
        if (image == "host") continue;
        auto it = s.images.find(image);
        if (it == s.images.end() || Clock::now() - it->second.at > f.options.image_cache_ttl)
          unknown.push_back(i);
      }
    }
    for (std::size_t i : unknown) {
      EngineBackend* b = nullptr;
      {
        std::lock_guard l(f.mu);
        b = f.slots[i]->backend.get();
      }
      CallOptions c;
      c.timeout = f.options.ping_timeout;
      auto info = b->client().image_inspect(image, c);
      std::lock_guard l(f.mu);
      if (info.ok() || engine_http_status(info.error()) == 404) {
        f.slots[i]->images[image] = Slot::Seen{info.ok(), Clock::now()};
      } else {
        reasons[i] = "failed: " + info.error().message();
        f.slots[i]->images.erase(image);
        f.wake = true;
        f.wake_cv.notify_all();
      }
    }
    std::size_t best = n;
    std::uint64_t epoch = 0;
    EngineBackend* backend = nullptr;
    {
      std::lock_guard l(f.mu);
      std::size_t best_free = 0;
      for (std::size_t i = 0; i < n; ++i) {
        Slot& s = *f.slots[i];
        if (tried[i]) continue;
        if (!s.up || !s.backend) {
          reasons[i] = "does not answer (" + s.why + ")";
          continue;
        }
        const std::size_t used = s.live + s.reserved;
        if (s.spec.capacity > 0 && used >= s.spec.capacity) {
          reasons[i] = "full (" + std::to_string(used) + " of " + std::to_string(s.spec.capacity) +
                       " sandboxes)";
          continue;
        }
        if (image == "host") {
          if (!s.local) {
            reasons[i] = "cannot run image \"host\" (not a local engine)";
            continue;
          }
        } else {
          auto it = s.images.find(image);
          if (it == s.images.end()) {
            if (reasons[i].empty()) reasons[i] = "image presence unknown";
            continue;
          }
          if (!it->second.present) {
            reasons[i] = "has no image '" + image + "'";
            continue;
          }
        }
        const std::size_t free_now = s.spec.capacity > 0
                                         ? s.spec.capacity - used
                                         : std::numeric_limits<std::size_t>::max() - used;
        if (best == n || free_now > best_free ||
            (free_now == best_free && used < f.slots[best]->live + f.slots[best]->reserved)) {
          best = i;
          best_free = free_now;
        }
      }
      if (best < n) {
        Slot& s = *f.slots[best];
        ++s.reserved;
        epoch = s.epoch.load(std::memory_order_acquire);
        backend = s.backend.get();
      }
    }
    if (best == n) break;
    tried[best] = true;
    Slot& s = *f.slots[best];
    auto made = backend->create(spec);
    std::unique_lock l(f.mu);
    --s.reserved;
    if (!made.ok()) {
      Error e = made.take_error();
      if (e.code == ErrorCode::kNotFound) s.images.erase(image);
      l.unlock();
      if (f.check(best) && e.code != ErrorCode::kNotFound)
        return Error::make(e.code, "engine " + s.spec.name + ": " + e.message());
      reasons[best] = e.code == ErrorCode::kNotFound ? "has no image '" + image + "'"
                                                     : "does not answer (" + e.message() + ")";
      continue;
    }
    if (!s.up || s.epoch.load(std::memory_order_acquire) != epoch) {
      reasons[best] = "does not answer (" + s.why + ")";
      l.unlock();
      (void)(*made)->destroy();
      continue;
    }
    std::string cid;
    if (auto* es = dynamic_cast<EngineSandbox*>(made->get())) cid = es->container_id();
    s.sandboxes[(*made)->id()] = cid;
    ++s.live;
    l.unlock();
    return std::unique_ptr<Sandbox>(new PlacedSandbox(fleet_, best, epoch, std::move(*made)));
  }
  // Why no engine could take it, per engine.
  std::string why;
  bool all_full = true, all_no_image = true;
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& r = reasons[i].empty() ? std::string("not tried") : reasons[i];
    why += (why.empty() ? "" : "; ") + f.slots[i]->spec.name + ": " + r;
    all_full = all_full && r.rfind("full", 0) == 0;
    all_no_image = all_no_image && r.rfind("has no image", 0) == 0;
  }
  const ErrorCode code = all_full       ? ErrorCode::kResourceExhausted
                         : all_no_image ? ErrorCode::kNotFound
                                        : ErrorCode::kUnavailable;
  return Error::make(code, "no engine can take this sandbox: " + why);
}

std::size_t MultiEngineBackend::warm_ready() const {
  std::vector<EngineBackend*> backends;
  {
    std::lock_guard l(fleet_->mu);
    for (const auto& s : fleet_->slots)
      if (s->up && s->backend) backends.push_back(s->backend.get());
  }
  std::size_t n = 0;
  for (auto* b : backends) n += b->warm_ready();
  return n;
}

// Every image of the engines that answer, each name once (a name on two
// engines is placed by the engines' own answers at create).
Result<std::vector<BackendImage>> MultiEngineBackend::list_images() {
  std::vector<EngineBackend*> backends;
  {
    std::lock_guard l(fleet_->mu);
    for (const auto& s : fleet_->slots)
      if (s->up && s->backend) backends.push_back(s->backend.get());
  }
  std::vector<BackendImage> out;
  std::set<std::string> seen;
  for (auto* b : backends) {
    auto images = b->list_images();
    if (!images.ok()) continue;  // its health check says why
    for (auto& i : *images)
      if (seen.insert(i.name).second) out.push_back(std::move(i));
  }
  return out;
}

std::vector<MultiEngineBackend::EngineState> MultiEngineBackend::engines() const {
  std::vector<EngineState> out;
  std::lock_guard l(fleet_->mu);
  for (const auto& s : fleet_->slots)
    out.push_back({s->spec.name, s->spec.url, s->up, s->live, s->spec.capacity, s->why});
  return out;
}

bool MultiEngineBackend::wait_for(const std::string& name, bool up,
                                  std::chrono::milliseconds timeout) const {
  std::unique_lock l(fleet_->mu);
  return fleet_->state_cv.wait_for(l, timeout, [&] {
    for (const auto& s : fleet_->slots)
      if (s->spec.name == name) return s->up == up;
    return false;
  });
}

void MultiEngineBackend::shutdown() {
  if (!fleet_) return;
  {
    std::lock_guard l(fleet_->mu);
    fleet_->stopping = true;
  }
  fleet_->wake_cv.notify_all();
  if (health_.joinable()) health_.join();
  for (auto& s : fleet_->slots) {
    // Serialised with a check under way (a failed call's).
    std::lock_guard one(s->check_mu);
    if (s->backend) s->backend->shutdown();
  }
}

}  // namespace sandcastle::sandbox::engine
