#include "sandbox/native/native_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>

#include "common/log.h"
#include "net/user_net.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/seccomp.h"

namespace sandcastle::sandbox::native {

Result<Prespawned> BackendShared::new_prespawned(const Limits& limits, Making making) {
  {
    std::lock_guard lock(pool_mu);
    if (stopping) return Error::make(ErrorCode::kUnavailable, "native backend: shutting down");
  }
  std::uint64_t n = serial.fetch_add(1);
  Prespawned p;
  p.id = std::string(kRuntimePrefix) + std::to_string(::getpid()) + "-" + std::to_string(n);
  p.ids = mapping_for_server(n);
  if (cgroups.version != CgroupVersion::kNone) {
    // A spare group from an earlier sandbox if there is one; a limit it
    // cannot take (memory below what it still holds) means a new one.
    if (auto spare = reaper.take_spare_cgroup()) {
      if (spare->apply_limits(limits))
        p.cgroup = std::move(spare);
      else
        (void)spare->remove();
    }
    if (!p.cgroup) {
      auto cg = SandboxCgroup::create(cgroups, p.id, limits);
      if (!cg) return cg.take_error();
      p.cgroup = std::move(*cg);
    }
    set_making_share(p.cgroup, making);
  }
  return p;
}

void BackendShared::set_making_share(const std::shared_ptr<SandboxCgroup>& cgroup, Making making) {
  // Under the lock: a create that starts waiting lifts these (take_ready).
  std::lock_guard lock(pool_mu);
  const bool ahead = making == Making::kAhead && waiting == 0 && !stopping;
  share_or_warn(*cgroup, ahead ? CpuShare::kBackground : CpuShare::kNormal);
  if (ahead) making_ahead.push_back(cgroup);
}

void BackendShared::lift_making_ahead_locked(std::vector<std::shared_ptr<SandboxCgroup>>& lifted) {
  for (auto& w : making_ahead)
    if (auto cg = w.lock()) {
      share_or_warn(*cg, CpuShare::kNormal);
      lifted.push_back(std::move(cg));
    }
  making_ahead.clear();
}

void BackendShared::share_or_warn(SandboxCgroup& cgroup, CpuShare share) {
  auto st = cgroup.set_cpu_share(share);
  if (!st && !share_warned.exchange(true))
    spdlog::warn(
        "native sandbox: setting a sandbox's CPU share: {} (sandboxes may run at the "
        "share they had; warned once)",
        st.error().message());
}

Result<std::string> BackendShared::bind_disk(Prespawned& p, const AttachedDisk& disk) {
  auto b = persist->bind_for(disk, p.id, p.ids.inside_uid, p.ids.inside_gid, p.ids.host_uid,
                             p.ids.host_gid);
  if (!b) return b.take_error();
  p.disk_bind = std::shared_ptr<DiskBind>(std::move(*b));
  return p.disk_bind->path();
}

Result<Prespawned> BackendShared::begin_sandbox(const Limits& limits, const AttachedDisk* disk,
                                                Making making) {
  auto made = new_prespawned(limits, making);
  if (!made) return made.take_error();
  Prespawned p = std::move(*made);
  InitConfig config;
  config.new_root = dirs.root_mount;
  config.mounts = host_image_base_plan(dirs);
  if (disk) {
    // Its storage as /workspace, bound before pivot_root (the bind's host
    // path is gone afterwards); the spec plan then makes no tmpfs there.
    auto path = bind_disk(p, *disk);
    if (!path) return path.take_error();
    config.mounts.push_back(MountOp{MountKind::kBind, *path, "workspace", 0, 0, true, ""});
  }
  config.seccomp_bpf = seccomp_bpf;
  config.uid = p.ids.inside_uid;
  config.gid = p.ids.inside_gid;
  auto init =
      spawn_pending_init(zygote, SpawnRequest{helper_path, p.ids, p.cgroup.get(), encode(config)});
  if (!init) return init.take_error();
  p.init = std::move(*init);
  return p;
}

Result<Prespawned> BackendShared::begin_image_sandbox(const Limits& limits, const ImageRoot& image,
                                                      const ImageIds& ids, const AttachedDisk* disk,
                                                      const std::string& restore_from,
                                                      Making making) {
  if (auto st = check_layer_paths(image.layers); !st) return st.take_error();
  auto made = new_prespawned(limits, making);
  if (!made) return made.take_error();
  Prespawned p = std::move(*made);
  p.ids.inside_uid = ids.uid;
  p.ids.inside_gid = ids.gid;
  std::vector<std::string> lowers(image.layers.rbegin(), image.layers.rend());
  if (::geteuid() == 0) {
    // The layers' owner (host 0) shown as this sandbox's host id (image_root.h).
    auto lm = LayerMounts::make(dirs, p.id, image.layers, p.ids.host_uid, p.ids.host_gid);
    if (!lm) return lm.take_error();
    p.layers = std::make_shared<LayerMounts>(std::move(*lm));
    lowers = p.layers->paths_top_first();
  }
  std::string disk_path;  // persistent: its storage holds the overlay's upper dir
  if (disk) {
    auto path = bind_disk(p, *disk);
    if (!path) return path.take_error();
    disk_path = *path;
  }
  InitConfig config;
  config.new_root = dirs.root_mount;
  config.mounts = image_base_plan(lowers, dirs, limits, disk_path, restore_from);
  config.root_subdir = kImageRootSubdir;
  config.seccomp_bpf = seccomp_bpf;
  config.uid = p.ids.inside_uid;
  config.gid = p.ids.inside_gid;
  auto init =
      spawn_pending_init(zygote, SpawnRequest{helper_path, p.ids, p.cgroup.get(), encode(config)});
  if (!init) return init.take_error();
  p.init = std::move(*init);
  return p;
}

Result<ReadySandbox> BackendShared::make_image_sandbox(const SandboxSpec& spec,
                                                       const ImageRoot& image, const ImageIds& ids,
                                                       const AttachedDisk* disk,
                                                       const std::string& restore_from,
                                                       Making making) {
  auto begun = begin_image_sandbox(spec.limits(), image, ids, disk, restore_from, making);
  if (!begun) return begun.take_error();
  // The idmapped layer binds (root mode) are unmounted on the reaper's
  // thread: unmounting waits for an RCU grace period (~5 ms).
  auto layers = std::move(begun->layers);
  auto ready = finish_sandbox(std::move(*begun), spec);
  if (layers) reaper.release(std::move(layers));
  if (ready) ready->image_id = image.id;
  return ready;
}

namespace {

std::string finish_bytes(const SandboxSpec& spec) {
  FinishConfig finish;
  finish.mounts = spec.image() == "host" ? host_image_spec_plan(spec) : image_finish_plan();
  finish.hostname = spec.hostname();
  return encode(finish);
}

// Without root, persistent sandboxes keep a copy of their files on disk
// (persist_mirror.h) instead of a loop-mounted image (persist_disk.h).
bool mirror_kind() {
  return ::geteuid() != 0;
}

Status check_supported(const SandboxSpec& spec, bool have_images, const PersistStore* persist,
                       const MirrorStore* mirror) {
  if (spec.image() != "host" && !have_images)
    return Error::make(ErrorCode::kInvalidArgument,
                       "native backend: image '" + spec.image() +
                           "' not supported (only \"host\": this server has no image store)");
  // allowlist and full: the sandbox stays as in none; the server serves the
  // listeners its init opens (open_net_listeners), and in full mode starts
  // pasta and loads the firewall in its namespaces (network_namespaces).
  if (spec.network() == NetworkMode::kFull)
    if (auto s = net::full_mode_available(); !s)
      return Error::make(ErrorCode::kUnavailable,
                         "native backend: network mode \"full\" is not available on this server: " +
                             s.error().message() +
                             "; use \"allowlist\" with the hosts the sandbox needs");
  if (spec.persistence() != Persistence::kEphemeral && mirror_kind()) return mirror->usable();
  if (spec.persistence() != Persistence::kEphemeral) return persist->usable();
  return {};
}

}  // namespace

Result<ReadySandbox> BackendShared::finish_sandbox(Prespawned p, const SandboxSpec& spec) {
  ReadySandbox r;
  r.finish = finish_bytes(spec);
  auto init = start_init(std::move(p.init), r.finish);
  // The storage's idmapped bind: the init has its own copy now (or failed).
  if (p.disk_bind) reaper.release(std::move(p.disk_bind));
  if (!init) return init.take_error();
  r.id = std::move(p.id);
  r.ids = p.ids;
  r.cgroup = std::move(p.cgroup);
  r.init = std::move(*init);
  return r;
}

std::size_t BackendShared::live_count() {
  std::lock_guard lock(live_mu);
  return live.size();
}

bool BackendShared::enter_create() {
  std::lock_guard lock(pool_mu);
  if (stopping) return false;
  ++creating;
  return true;
}

void BackendShared::leave_create() {
  {
    std::lock_guard lock(pool_mu);
    --creating;
  }
  pool_cv.notify_all();
}

void BackendShared::track(NativeSandbox* sandbox) {
  std::lock_guard lock(live_mu);
  live.insert(sandbox);
}

void BackendShared::untrack(NativeSandbox* sandbox) {
  {
    std::lock_guard lock(live_mu);
    live.erase(sandbox);
  }
  // Room under the server's cap again: the refill may make one.
  pool_cv.notify_all();
}

void BackendShared::shutdown() {
  std::call_once(shutdown_once, [this] {
    std::vector<std::shared_ptr<SandboxCgroup>> lifted;  // let go after the lock
    {
      std::unique_lock lock(pool_mu);
      stopping = true;
      // A refill in progress finishes at the normal share: shutdown joins it.
      lift_making_ahead_locked(lifted);
      pool_cv.notify_all();
      // A create in progress ends with its sandbox tracked (or failed).
      pool_cv.wait(lock, [&] { return creating == 0; });
    }
    lifted.clear();
    for (auto& t : refill_threads) t.join();
    std::deque<ReadySandbox> pooled;
    {
      std::lock_guard lock(pool_mu);
      pooled.swap(pool);
    }
    for (auto& p : pooled) reaper.kill_and_release(p.id, std::move(p.init), std::move(p.cgroup));
    {
      // Sandboxes an owner still holds: destroyed now, so their inits die
      // while the zygote lives and reaps them. Their owners see "destroyed".
      // release(), not destroy(): a persistent sandbox's files stay.
      std::lock_guard lock(live_mu);
      for (NativeSandbox* sb : live) (void)sb->release();
    }
    reaper.drain();
    reaper.release_spares();
    zygote.stop();
    if (persist) persist->detach_all();
    if (auto st = remove_tree(dirs.base); !st)
      spdlog::warn("native sandbox: runtime directory {}: {}", dirs.base, st.error().message());
  });
}

BackendShared::~BackendShared() {
  shutdown();
}

std::string find_init_helper(const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  if (const char* env = std::getenv("SANDCASTLE_INIT"); env && *env) return env;
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    std::string candidate = dir + "/sandcastle-init";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
#ifdef SANDCASTLE_INIT_PATH
  return SANDCASTLE_INIT_PATH;
#else
  return "sandcastle-init";
#endif
}

NativeBackend::NativeBackend(std::shared_ptr<BackendShared> shared) : shared_(std::move(shared)) {}
NativeBackend::~NativeBackend() {
  shared_->shutdown();
}

void NativeBackend::shutdown() {
  shared_->shutdown();
}

const BackendCapabilities& NativeBackend::capabilities() const {
  return shared_->caps;
}

std::size_t NativeBackend::warm_ready() const {
  std::lock_guard lock(shared_->pool_mu);
  return shared_->pool.size();
}

void NativeBackend::set_ahead_command(std::optional<AheadCommand> command) {
  std::lock_guard lock(shared_->pool_mu);
  if (shared_->ahead_command == command) return;
  shared_->ahead_command = std::move(command);
  if (!shared_->ahead_command) return;
  // The ones made before it start it now, as the budget allows.
  for (auto& r : shared_->pool)
    if (!r.ahead && shared_->ahead_affordable_locked()) shared_->start_ahead_or_warn(r);
}

PoolStats NativeBackend::pool_stats() const {
  std::lock_guard lock(shared_->pool_mu);
  return shared_->pool_stats_locked();
}

bool NativeBackend::wait_pool(const std::function<bool(const PoolStats&)>& done,
                              std::chrono::milliseconds timeout) const {
  std::unique_lock lock(shared_->pool_mu);
  return shared_->pool_cv.wait_for(lock, timeout,
                                   [&] { return done(shared_->pool_stats_locked()); });
}

void NativeBackend::pool_wake() {
  { std::lock_guard lock(shared_->pool_mu); }
  shared_->pool_cv.notify_all();
}

Result<std::unique_ptr<NativeBackend>> NativeBackend::create(NativeBackendOptions options) {
  auto shared = std::make_shared<BackendShared>();
  shared->helper_path = find_init_helper(options.init_helper_path);
  if (::access(shared->helper_path.c_str(), X_OK) != 0)
    return Error::from_errno("init helper " + shared->helper_path);
  auto dirs = prepare_runtime_dirs();
  if (!dirs) return dirs.take_error();
  shared->dirs = *dirs;
  shared->cgroups = detect_cgroups();
  auto bpf = compile_seccomp_bpf();
  if (!bpf) return bpf.take_error();
  shared->seccomp_bpf = *bpf;

  BackendCapabilities& c = shared->caps;
  c.user_namespaces = true;
  c.seccomp = true;
  c.rootless = ::geteuid() != 0;
  c.cgroup_version = cgroup_version_name(shared->cgroups.version);
  c.cgroup_limits = shared->cgroups.version != CgroupVersion::kNone;
  if (!c.cgroup_limits) {
    c.notes.push_back(shared->cgroups.why_not);
    c.notes.push_back(
        "memory limit per process via RLIMIT_DATA; process limit via RLIMIT_NPROC; "
        "no CPU quota; no OOM accounting");
  } else if (shared->cgroups.version == CgroupVersion::kV1 &&
             !shared->cgroups.v1_parents.count("cpu")) {
    c.notes.push_back("cgroup v1 cpu controller unavailable: no CPU quota");
  }
  for (const auto& n : c.notes) spdlog::warn("native sandbox: {}", n);
  shared->images = std::move(options.images);
  shared->persist = std::make_unique<PersistStore>(options.storage_dir, shared->dirs);
  shared->mirror = std::make_unique<MirrorStore>(options.storage_dir);
  if (options.pool_spec.persistence() == Persistence::kPersistent && options.pool.min > 0) {
    // A persistent sandbox is made for its storage: never ahead of demand.
    spdlog::warn("native sandbox: no warm pool: its spec is persistent");
    options.pool.min = 0;
  }
  if (auto st = check_supported(options.pool_spec, bool(shared->images), shared->persist.get(),
                                shared->mirror.get());
      !st && options.pool.min > 0) {
    // No create could take one: the pool would only cost memory.
    spdlog::warn("native sandbox: no warm pool: its spec is one this backend cannot make ({})",
                 st.error().message());
    options.pool.min = 0;
  }
  shared->sizer = PoolSizer(options.pool);
  shared->pool_spec = std::move(options.pool_spec);
  shared->pool_key_bytes = pool_key(shared->pool_spec);
  shared->clock =
      options.clock ? std::move(options.clock) : [] { return std::chrono::steady_clock::now(); };
  // pool.min == 0: no refill thread, so nothing is made ahead of demand.
  if (options.pool.min > 0)
    for (unsigned i = 0; i < BackendShared::kRefillThreads; ++i)
      shared->refill_threads.emplace_back([s = shared.get()] { s->refill_loop(); });
  return std::unique_ptr<NativeBackend>(new NativeBackend(std::move(shared)));
}

namespace {

// The spec a sandbox on `image` runs with: the image's env under the
// spec's, and its working dir where the spec kept the default.
Result<SandboxSpec> spec_on_image(const SandboxSpec& spec, const ImageRoot& image) {
  SpecOptions o;
  o.image = spec.image();
  o.limits = spec.limits();
  for (const auto& kv : image.env) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = kv.substr(0, eq);
    if (valid_env_name(name) && kv.find('\0') == std::string::npos) o.env[name] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : spec.env()) o.env[k] = v;
  o.workdir = spec.workdir();
  if (o.workdir == "/workspace" && !image.working_dir.empty() && image.working_dir[0] == '/')
    o.workdir = image.working_dir;
  o.hostname = spec.hostname();
  o.network = spec.network();
  o.network_allow = spec.network_allow();
  o.network_deny = spec.network_deny();
  o.persistence = spec.persistence();
  o.storage_id = spec.storage_id();
  auto s = SandboxSpec::create(std::move(o));
  if (!s)
    return Error::make(ErrorCode::kInvalidArgument,
                       "image " + image.name + ": " + s.error().message());
  return s;
}

}  // namespace

Result<std::unique_ptr<Sandbox>> NativeBackend::create_from_image(const SandboxSpec& requested) {
  auto image = shared_->images(requested.image());
  if (!image) return image.take_error();
  auto ids = resolve_image_user(*image);
  if (!ids) return ids.take_error();
  auto spec = spec_on_image(requested, *image);
  if (!spec) return spec.take_error();
  if (!shared_->enter_create())
    return Error::make(ErrorCode::kUnavailable, "native backend: shutting down");
  struct Leave {
    BackendShared& s;
    ~Leave() { s.leave_create(); }
  } leave{*shared_};
  std::shared_ptr<AttachedDisk> disk;
  std::shared_ptr<MirrorAttachment> mirror;
  if (spec->persistence() == Persistence::kPersistent && mirror_kind()) {
    // Its overlay's upper dir is kept: copied in by its init before the
    // overlay is mounted, out after each call.
    auto m = shared_->mirror->attach(spec->storage_id(), true);
    if (!m) return m.take_error();
    mirror = std::move(*m);
  } else if (spec->persistence() == Persistence::kPersistent) {
    if (auto st = refuse_other_kind(shared_->persist->storage_dir(), spec->storage_id(), true); !st)
      return st.take_error();
    // Its root owned by the image's user: the overlay's upper dir is theirs.
    auto d =
        shared_->persist->attach(spec->storage_id(), spec->limits().disk_bytes, ids->uid, ids->gid);
    if (!d) return d.take_error();
    disk = std::move(*d);
  }
  // From the pool when it is one of this image (as the store has it now);
  // never for a persistent sandbox (made on its own storage).
  std::optional<ReadySandbox> pooled;
  if (!disk && !mirror) pooled = shared_->take_ready(pool_key(requested));
  if (pooled && pooled->image_id != image->id) {
    shared_->reaper.kill_and_release(pooled->id, std::move(pooled->init), std::move(pooled->cgroup));
    pooled.reset();
  }
  Result<ReadySandbox> ready = pooled ? Result<ReadySandbox>(std::move(*pooled))
                                      : shared_->make_image_sandbox(*spec, *image, *ids, disk.get(),
                                                                    mirror ? mirror->path() : "");
  if (!ready) return ready.take_error();
  auto sb = std::make_unique<NativeSandbox>(std::move(ready->id), std::move(*spec), shared_, ready->ids,
                                            std::move(ready->cgroup), std::move(ready->init));
  sb->keep_disk(std::move(disk));
  if (mirror) (void)sb->keep_mirror(std::move(mirror), false);
  if (image->lease) sb->keep_image_lease(image->lease(sb->id()));
  return std::unique_ptr<Sandbox>(std::move(sb));
}

Result<std::unique_ptr<Sandbox>> NativeBackend::create(const SandboxSpec& spec) {
  if (auto st = check_supported(spec, bool(shared_->images), shared_->persist.get(),
                                shared_->mirror.get());
      !st)
    return st.take_error();
  if (spec.image() != "host") return create_from_image(spec);

  if (!shared_->enter_create())
    return Error::make(ErrorCode::kUnavailable, "native backend: shutting down");
  struct Leave {
    BackendShared& s;
    ~Leave() { s.leave_create(); }
  } leave{*shared_};
  std::shared_ptr<AttachedDisk> disk;
  const auto t0 = std::chrono::steady_clock::now();
  std::shared_ptr<MirrorAttachment> mirror;
  if (spec.persistence() == Persistence::kPersistent && mirror_kind()) {
    auto m = shared_->mirror->attach(spec.storage_id());
    if (!m) return m.take_error();
    mirror = std::move(*m);
  } else if (spec.persistence() == Persistence::kPersistent) {
    if (auto st = refuse_other_kind(shared_->persist->storage_dir(), spec.storage_id(), true); !st)
      return st.take_error();
    auto d = shared_->persist->attach(spec.storage_id(), spec.limits().disk_bytes, 1000, 1000);
    if (!d) return d.take_error();
    disk = std::move(*d);
  }
  const auto t1 = std::chrono::steady_clock::now();
  // A sandbox made ahead of demand for this very spec if there is one (then
  // refill in the background), otherwise one begun now. A persistent one
  // takes a warm one of the same spec but for its /workspace, and gets its
  // storage mounted over that last (fork_sandbox: -40 ms).
  std::optional<ReadySandbox> ready;
  if (!disk && !mirror) ready = shared_->take_ready(pool_key(spec));
  if (disk) ready = shared_->take_shell(spec, *disk);
  const bool warm = ready.has_value();
  if (!ready) {
    auto begun = shared_->begin_sandbox(spec.limits(), disk.get());
    if (!begun) return begun.take_error();
    auto finished = shared_->finish_sandbox(std::move(*begun), spec);
    if (!finished) return finished.take_error();
    ready.emplace(std::move(*finished));
  }
  if (disk) {
    using ms = std::chrono::duration<double, std::milli>;
    const auto t2 = std::chrono::steady_clock::now();
    spdlog::debug("native sandbox: storage {}: mounted in {:.1f} ms, {} in {:.1f} ms",
                  spec.storage_id(), ms(t1 - t0).count(),
                  warm ? "a warm sandbox took it" : "started", ms(t2 - t1).count());
  }
  auto sb = std::make_unique<NativeSandbox>(std::move(ready->id), spec, shared_, ready->ids,
                                            std::move(ready->cgroup), std::move(ready->init));
  sb->keep_disk(std::move(disk));
  // Its files from the last start, copied in before anything runs there.
  if (mirror)
    if (auto st = sb->keep_mirror(std::move(mirror)); !st) return st.take_error();
  return std::unique_ptr<Sandbox>(std::move(sb));
}

Status NativeBackend::checkpoint_support() const {
  return criu_check_once();
}

Result<std::unique_ptr<Sandbox>> NativeBackend::restore(const SandboxSpec&, const std::string&) {
  if (auto st = criu_check_once(); !st) return st.take_error();
  return Error::make(ErrorCode::kUnavailable,
                     "native backend: restoring a checkpoint is not implemented");
}

Status NativeBackend::copy_storage(const std::string& from, const std::string& to) {
  if (mirror_kind())
    return shared_->mirror->copy(from, to, [this](const PersistMirrorWire& w, int a, int b) {
      return run_in_helper_sandbox(shared_, w, a, b);
    });
  if (auto st = refuse_other_kind(shared_->persist->storage_dir(), from, true); !st) return st;
  return shared_->persist->copy(from, to);
}

Status NativeBackend::remove_storage(const std::string& id) {
  if (mirror_kind())
    return shared_->mirror->remove(id, [this](const PersistMirrorWire& w, int a, int b) {
      return run_in_helper_sandbox(shared_, w, a, b);
    });
  return shared_->persist->remove(id);
}

std::vector<std::string> NativeBackend::list_storage() const {
  if (mirror_kind()) return shared_->mirror->list();
  return shared_->persist->list();
}

}  // namespace sandcastle::sandbox::native
