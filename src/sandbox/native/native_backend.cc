#include "sandbox/native/native_backend.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>

#include "common/log.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/seccomp.h"

namespace sandcastle::sandbox::native {

Result<Prespawned> BackendShared::begin_sandbox(const Limits& limits) {
  std::uint64_t n = serial.fetch_add(1);
  Prespawned p;
  p.id = std::string(kRuntimePrefix) + std::to_string(::getpid()) + "-" + std::to_string(n);
  p.ids = mapping_for_server(n);
  if (cgroups.version != CgroupVersion::kNone) {
    auto cg = SandboxCgroup::create(cgroups, p.id, limits);
    if (!cg) return cg.take_error();
    p.cgroup = std::move(*cg);
  }
  InitConfig config;
  config.new_root = dirs.root_mount;
  config.mounts = host_image_base_plan(dirs.etc_template);
  config.seccomp_bpf = seccomp_bpf;
  config.uid = p.ids.inside_uid;
  config.gid = p.ids.inside_gid;
  auto init = spawn_pending_init(spawner, SpawnRequest{helper_path, p.ids, p.cgroup.get(), encode(config)});
  if (!init) return init.take_error();
  p.init = std::move(*init);
  return p;
}

std::optional<Prespawned> BackendShared::take_prespawned() {
  for (;;) {
    std::optional<Prespawned> p;
    {
      std::lock_guard lock(pool_mu);
      if (pool.empty()) return std::nullopt;
      p.emplace(std::move(pool.front()));
      pool.pop_front();
    }
    // An init that died while waiting (killed by hand, say) is readable.
    struct pollfd pfd {p->init.process.pidfd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 0) == 0) return p;
    reaper.kill_and_release(p->id, std::move(p->init.process), std::move(p->cgroup));
  }
}

void BackendShared::schedule_refill() {
  {
    std::lock_guard lock(pool_mu);
    if (prespawn_target == 0 || refill_queued || stopping || pool.size() >= prespawn_target) return;
    refill_queued = true;
  }
  // `this` outlives the job: the destructor sets `stopping` (no more posts)
  // and then waits for the spawner queue to run dry before tearing down.
  spawner.post([shared = this] {
    for (;;) {
      {
        std::lock_guard lock(shared->pool_mu);
        if (shared->stopping || shared->pool.size() >= shared->prespawn_target) {
          shared->refill_queued = false;
          return;
        }
      }
      auto p = shared->begin_sandbox(Limits{});
      std::lock_guard lock(shared->pool_mu);
      if (!p) {
        // Not retried in a loop: the next create tries again.
        spdlog::warn("native sandbox: prespawn failed: {}", p.error().message());
        shared->refill_queued = false;
        return;
      }
      shared->pool.push_back(std::move(*p));
    }
  });
}

BackendShared::~BackendShared() {
  {
    std::lock_guard lock(pool_mu);
    stopping = true;
  }
  // Every queued refill has run (or seen `stopping`) once this returns.
  spawner.run([] {});
  for (auto& p : pool) reaper.kill_and_release(p.id, std::move(p.init.process), std::move(p.cgroup));
  pool.clear();
  reaper.drain();
  (void)remove_tree(dirs.base);
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
NativeBackend::~NativeBackend() = default;

const BackendCapabilities& NativeBackend::capabilities() const { return shared_->caps; }

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
    c.notes.push_back("memory limit per process via RLIMIT_DATA; process limit via RLIMIT_NPROC; "
                      "no CPU quota; no OOM accounting");
  } else if (shared->cgroups.version == CgroupVersion::kV1 && !shared->cgroups.v1_parents.count("cpu")) {
    c.notes.push_back("cgroup v1 cpu controller unavailable: no CPU quota");
  }
  for (const auto& n : c.notes) spdlog::warn("native sandbox: {}", n);
  shared->prespawn_target = options.prespawn;
  shared->schedule_refill();
  return std::unique_ptr<NativeBackend>(new NativeBackend(std::move(shared)));
}

Result<std::unique_ptr<Sandbox>> NativeBackend::create(const SandboxSpec& spec) {
  if (spec.image() != "host")
    return Error::make(ErrorCode::kInvalidArgument,
                       "native backend: image '" + spec.image() + "' not supported (only \"host\")");
  if (spec.network() != NetworkMode::kNone)
    return Error::make(ErrorCode::kInvalidArgument, "native backend: only network mode \"none\"");
  if (spec.persistence() != Persistence::kEphemeral)
    return Error::make(ErrorCode::kInvalidArgument, "native backend: only ephemeral sandboxes");

  // A prespawned sandbox if there is one (then refill in the background),
  // otherwise one begun now.
  std::optional<Prespawned> pre = shared_->take_prespawned();
  shared_->schedule_refill();
  if (!pre) {
    auto begun = shared_->begin_sandbox(spec.limits());
    if (!begun) return begun.take_error();
    pre.emplace(std::move(*begun));
  } else if (pre->cgroup) {
    if (auto st = pre->cgroup->apply_limits(spec.limits()); !st) {
      shared_->reaper.kill_and_release(pre->id, std::move(pre->init.process), std::move(pre->cgroup));
      return st.take_error();
    }
  }

  FinishConfig finish;
  finish.mounts = host_image_spec_plan(spec);
  finish.hostname = spec.hostname();
  auto init = start_init(std::move(pre->init), encode(finish));
  if (!init) return init.take_error();

  // The sandbox's root as the server sees it; file operations resolve
  // inside it. Opened once: the fd pins the tree even if pids are reused.
  std::string root_path = "/proc/" + std::to_string(init->pid) + "/root";
  UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) {
    Error e = Error::from_errno("open " + root_path);
    kill_and_reap(*init);
    return e;
  }
  return std::unique_ptr<Sandbox>(new NativeSandbox(std::move(pre->id), spec, shared_, pre->ids,
                                                    std::move(pre->cgroup), std::move(*init), std::move(root)));
}

}  // namespace sandcastle::sandbox::native
