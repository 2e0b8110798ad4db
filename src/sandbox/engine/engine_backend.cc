#include "sandbox/engine/engine_backend.h"

#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <random>

#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/native_sandbox.h"

namespace sandcastle::sandbox::engine {
namespace {

using nlohmann::json;

// The native key, plus the network mode: unlike a native sandbox, an
// allowlist container differs from a mode-none one (its sysctl lets the
// agent bind :53), so it cannot come from a mode-none pool.
std::string engine_pool_key(const SandboxSpec& spec) {
  return native::pool_key(spec) + "|" + network_mode_name(spec.network());
}

// Full mode is native only: its firewall is loaded inside the sandbox's
// network namespace before the route exists, which an engine (maybe remote,
// maybe rootless) does not let the server enter.
Status check_network(const SandboxSpec& spec, bool allowlist) {
  if (spec.network() == NetworkMode::kNone) return {};
  if (spec.network() == NetworkMode::kAllowList) {
    if (allowlist) return {};
    return Error::make(ErrorCode::kInvalidArgument,
                       "engine backend: network mode \"allowlist\" is not offered by this server "
                       "(add it to [network] modes; with several engines, only \"none\")");
  }
  return Error::make(ErrorCode::kInvalidArgument,
                     "engine backend: network mode \"full\" runs on the native backend only "
                     "(its firewall is loaded inside the sandbox's network namespace); use "
                     "\"allowlist\" with the hosts the sandbox needs");
}

constexpr auto kStartTimeout = std::chrono::seconds(60);

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "host";
  return buf;
}

}  // namespace

std::string find_agent() {
  if (const char* env = std::getenv("SANDCASTLE_AGENT"); env && *env) return env;
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string dir(exe);
    dir = dir.substr(0, dir.rfind('/'));
    std::string candidate = dir + "/sandcastle-agent";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
#ifdef SANDCASTLE_AGENT_PATH
  return SANDCASTLE_AGENT_PATH;
#else
  return "sandcastle-agent";
#endif
}

Result<std::unique_ptr<EngineBackend>> EngineBackend::create(const EngineBackendOptions& options) {
  std::unique_ptr<EngineBackend> b(new EngineBackend());
  if (auto st = b->prepare(options); !st) return st.take_error();
  return b;
}

Status EngineBackend::prepare(const EngineBackendOptions& options) {
  if (::access(options.agent_path.c_str(), X_OK) != 0)
    return Error::from_errno("the container agent " + options.agent_path +
                             " (built with sandcastle as sandcastle-agent)");
  agent_path_ = options.agent_path;
  allowlist_ = options.allowlist;
  auto client = EngineClient::connect(options.engine);
  if (!client) {
    Error e = client.take_error();
    if (e.message().find("Permission denied") != std::string::npos)
      e.context +=
          " (this server's user may not use the engine's socket: add it to the engine's "
          "group, e.g. docker, or point --engine at a socket it owns, such as rootless "
          "podman's unix://$XDG_RUNTIME_DIR/podman/podman.sock)";
    return e;
  }
  shared_ = std::make_shared<EngineShared>();
  shared_->client = std::shared_ptr<EngineClient>(std::move(*client));
  shared_->engine_name = options.engine.url;
  shared_->remover = std::make_unique<ContainerRemover>(shared_->client);
  // Local means a unix socket: its engine runs on this host and can bind
  // this host's files (the agent, the "host" image's /usr). Any tcp://
  // engine, even one on 127.0.0.1, is treated as on another host.
  local_ = shared_->client->endpoint().kind == Endpoint::Kind::kUnix;
  if (auto v = shared_->client->version(); v.ok())
    if (auto comps = v->find("Components"); comps != v->end() && comps->is_array())
      for (const auto& c : *comps)
        if (c.is_object() && c.value("Name", std::string()).find("Podman") != std::string::npos)
          podman_ = true;
  server_tag_ = host_name() + ":" + std::to_string(::getpid());
  if (local_) {
    // A directory of this backend's own: a process may hold a native backend
  // and several engine backends (tests; several engines), none removing
  // another's.
  static std::atomic<unsigned> serial{0};
  auto dirs = native::prepare_runtime_dirs("engine-" + std::to_string(serial.fetch_add(1)));
    if (!dirs) return dirs.take_error();
    runtime_base_ = dirs->base;
    etc_dir_ = dirs->etc_template;
    shared_->share_dir = dirs->share;
    if (auto st = install_agent(); !st) return st;
  } else {
    auto share = RemoteShare::load(agent_path_);
    if (!share) return share.take_error();
    shared_->remote = std::move(*share);
  }
  sweep_leftovers();
  if (local_) {
    auto base = shared_->client->image_inspect(kHostBaseImage);
    if (!base) {
      if (engine_http_status(base.error()) != 404) return base.take_error();
      std::string tar = host_base_tar();
      std::size_t at = 0;
      ByteSource src = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
        std::size_t n = std::min(cap, tar.size() - at);
        std::copy_n(tar.data() + at, n, buf);
        at += n;
        return n;
      };
      if (auto id = shared_->client->image_import(src, kHostBaseImage); !id) return id.take_error();
    }
  }
  caps_.seccomp = true;
  caps_.cgroup_limits = true;
  caps_.cgroup_version = "engine";
  caps_.notes.push_back(
      "isolation is the engine's: its runtime's namespaces and default seccomp "
      "profile, plus CapDrop ALL, no-new-privileges, a read-only root and no "
      "network");
  if (!local_)
    caps_.notes.push_back("engine " + options.engine.url +
                          " is treated as on another host: no bind mounts of this host's files, "
                          "the agent and shared files are copied into each container's " +
                          std::string(kSharedDir) + " volume; the \"host\" image is refused");
  pool_size_ = options.pool_spec ? options.pool_size : 0;
  if (pool_size_ > 0) {
    pools_.emplace(
        engine_pool_key(*options.pool_spec),
        Pool{*options.pool_spec, pool_size_, {}, std::chrono::steady_clock::now(), false});
    refill_ = std::thread([this] { refill_loop(); });
  }
  return ok_status();
}

EngineBackend::~EngineBackend() {
  // shutdown() allocates and joins threads; a destructor must not throw, so
  // a failure there (out of memory, say) is reported and the rest skipped.
  try {
    shutdown();
  } catch (const std::exception& e) {
    spdlog::error("engine backend: shutdown at destruction failed: {}", e.what());
  }
}

// The agent, copied into the shared directory (bound read-only into every
// container): a copy, so replacing the server's build never changes a
// running container's agent under it.
Status EngineBackend::install_agent() {
  const std::string dst = shared_->share_dir + "/" + kAgentInShare;
  std::ifstream in(agent_path_, std::ios::binary);
  std::ofstream out(dst + ".tmp", std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
  out.close();
  if (!in || !out || ::chmod((dst + ".tmp").c_str(), 0755) != 0 ||
      ::rename((dst + ".tmp").c_str(), dst.c_str()) != 0)
    return Error::from_errno("copy the agent to " + dst);
  return ok_status();
}

std::string EngineBackend::new_id() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[17];
  (void)std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return std::string("eng-") + std::string(buf, 12);
}

// Containers a crashed server of this host left: labelled with its tag,
// whose pid is gone.
void EngineBackend::sweep_leftovers() {
  auto list = shared_->client->call_json(
      "GET", "/containers/json?all=1&filters=" + query_escape(R"({"label":["sandcastle=1"]})"),
      nullptr);
  if (!list || !list->is_array()) return;
  const std::string prefix = host_name() + ":";
  for (const auto& c : *list) {
    auto labels = c.find("Labels");
    auto id = c.find("Id");
    if (labels == c.end() || !labels->is_object() || id == c.end() || !id->is_string()) continue;
    auto tag = labels->find("sandcastle.server");
    if (tag == labels->end() || !tag->is_string()) continue;
    const std::string t = tag->get<std::string>();
    if (t.rfind(prefix, 0) != 0) continue;
    const long pid = std::strtol(t.c_str() + prefix.size(), nullptr, 10);
    // Only a server that is surely gone: EPERM is another user's live one.
    if (pid <= 0 || pid == ::getpid() || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH)
      continue;
    remove_quietly(id->get<std::string>());
  }
}

void EngineBackend::remove_quietly(const std::string& container_id) {
  shared_->remover->remove(container_id);
}

Result<ContainerPlan> EngineBackend::plan_for(const SandboxSpec& spec, const std::string& id) {
  ContainerPlan plan;
  plan.share_dir = shared_->share_dir;
  plan.sandbox_id = id;
  plan.server_tag = server_tag_;
  plan.podman = podman_;
  plan.remote = !local_;
  if (spec.image() == "host" && !local_)
    return Error::make(ErrorCode::kInvalidArgument,
                       "image \"host\" runs this host's /usr, which engine " +
                           shared_->engine_name +
                           " (not a unix socket: another host) does not have; name a real image "
                           "on that engine (CONTAINER_IMAGE)");
  if (spec.image() == "host") {
    plan.image = kHostBaseImage;
    plan.host_root = true;
    plan.etc_dir = etc_dir_;
    return plan;
  }
  plan.image = spec.image();
  std::lock_guard l(mu_);
  auto it = image_facts_.find(plan.image);
  if (it == image_facts_.end()) {
    auto info = shared_->client->image_inspect(plan.image);
    if (!info) {
      if (engine_http_status(info.error()) == 404)
        return Error::make(ErrorCode::kNotFound,
                           "image '" + plan.image + "' is not on engine " + shared_->engine_name +
                               ": pull or load it there first (docker pull / podman load)");
      return info.take_error();
    }
    ImageFacts f;
    f.user = plan.user;
    // The image's own user if it names one, else the sandbox user; an image
    // save_sandbox made says how to start it in its labels.
    if (auto cfg = info->find("Config"); cfg != info->end() && cfg->is_object()) {
      if (auto u = cfg->find("User");
          u != cfg->end() && u->is_string() && !u->get<std::string>().empty())
        f.user = u->get<std::string>();
      if (auto lb = cfg->find("Labels"); lb != cfg->end() && lb->is_object()) {
        f.host_root = lb->value(kLabelHostRoot, std::string()) == "1";
        if (lb->value(kLabelWorkspaceSeed, std::string()) == kWorkspaceSeedDir)
          f.workspace_seed = kWorkspaceSeedDir;
      }
    }
    it = image_facts_.emplace(plan.image, f).first;
  }
  plan.user = it->second.user;
  plan.workspace_seed = it->second.workspace_seed;
  if (it->second.host_root) {
    if (!local_)
      return Error::make(ErrorCode::kInvalidArgument,
                         "image '" + plan.image +
                             "' was saved from the \"host\" image and runs this host's /usr, "
                             "which engine " +
                             shared_->engine_name + " (another host) does not have");
    plan.host_root = true;
    plan.etc_dir = etc_dir_;
  }
  return plan;
}

Result<std::unique_ptr<AgentLink>> EngineBackend::connect_agent(const std::string& container_id) {
  EngineClient& c = *shared_->client;
  json exec{{"AttachStdin", true},
            {"AttachStdout", true},
            {"AttachStderr", true},
            {"Tty", false},
            {"Cmd", {kAgentInContainer, "serve"}}};
  auto exec_id = c.exec_create(container_id, exec);
  if (!exec_id) return exec_id.take_error();
  CallOptions call;
  call.timeout = std::chrono::milliseconds(kStartTimeout);
  auto session = c.exec_attach(*exec_id, call);
  if (!session) return session.take_error();
  auto raw = (*session)->take_stream();
  if (!raw) return raw.take_error();
  AgentLink::Options o;
  o.name = container_id.substr(0, 12);
  return AgentLink::start(std::move(raw->fd), std::move(raw->buffered), o);
}

Result<EngineContainer> EngineBackend::start_container(const SandboxSpec& spec,
                                                       const std::string& id) {
  if (spec.persistence() == Persistence::kPersistent)
    return Error::make(ErrorCode::kUnavailable,
                       "persistent sandboxes are not available on the engine backend yet; use the "
                       "native backend, or save_sandbox to keep a sandbox as an image");
  if (auto s = check_network(spec, allowlist_); !s) return s.take_error();
  auto plan = plan_for(spec, id);
  if (!plan) return plan.take_error();
  EngineClient& c = *shared_->client;
  auto cid = c.container_create(container_config(spec, *plan), "sandcastle-" + id);
  if (!cid) return cid.take_error();
  EngineContainer out;
  out.container_id = *cid;
  auto fail = [&](Error e) -> Result<EngineContainer> {
    remove_quietly(out.container_id);
    return e;
  };
  // A remote engine's container gets the agent (its entrypoint) and the
  // shared files in its volume before it starts.
  if (shared_->remote)
    if (auto st = shared_->remote->fill(c, out.container_id, &out.shared_names); !st)
      return fail(st.take_error());
  if (auto st = c.container_start(out.container_id); !st) return fail(st.take_error());
  auto link = connect_agent(out.container_id);
  if (!link) return fail(link.take_error());
  out.link = std::move(*link);
  out.workspace_seed = plan->workspace_seed;
  return out;
}

Result<std::unique_ptr<Sandbox>> EngineBackend::create(const SandboxSpec& spec) {
  // Counted, so shutdown() waits for it before removing the directories
  // its container binds.
  struct InFlight {
    EngineBackend& b;
    explicit InFlight(EngineBackend& backend) : b(backend) {}
    ~InFlight() {
      std::lock_guard l(b.mu_);
      if (--b.creating_ == 0) b.refill_cv_.notify_all();
    }
  };
  {
    std::unique_lock l(mu_);
    if (stopping_)
      return Error::make(ErrorCode::kUnavailable, "the engine backend is shutting down");
    ++creating_;
  }
  InFlight in_flight(*this);
  // Before the pools: a refused spec must not become a pool to refill.
  if (auto s = check_network(spec, allowlist_); !s) return s.take_error();
  const std::string key = engine_pool_key(spec);
  std::optional<Warm> taken;
  std::deque<Warm> evicted;
  {
    std::lock_guard l(mu_);
    if (auto it = pools_.find(key); it != pools_.end()) {
      it->second.used = std::chrono::steady_clock::now();
      if (!it->second.ready.empty()) {
        taken = std::move(it->second.ready.front());
        it->second.ready.pop_front();
        refill_cv_.notify_one();
      }
    } else if (pool_size_ > 0 && spec.persistence() == Persistence::kEphemeral) {
      learn(key, spec, evicted);
    }
  }
  for (auto& w : evicted) {
    w.container.link->close();
    remove_quietly(w.container.container_id);
  }
  if (taken) {
    if (taken->container.link->alive()) {
      const std::string seed = taken->container.workspace_seed;
      return finish(
          std::make_unique<EngineSandbox>(shared_, taken->id, spec, std::move(taken->container)),
          seed);
    }
    remove_quietly(taken->container.container_id);
  }
  const std::string id = new_id();
  auto container = start_container(spec, id);
  if (!container) return container.take_error();
  const std::string seed = container->workspace_seed;
  return finish(std::make_unique<EngineSandbox>(shared_, id, spec, std::move(*container)), seed);
}

// A pool of one for a spec a create asked for; past kMaxPools the least
// recently used learned pool goes (its containers to `evicted`). mu_ held.
void EngineBackend::learn(const std::string& key, const SandboxSpec& spec,
                          std::deque<Warm>& evicted) {
  if (pools_.size() >= kMaxPools) {
    auto oldest = pools_.end();
    for (auto it = pools_.begin(); it != pools_.end(); ++it)
      if (it->second.learned && (oldest == pools_.end() || it->second.used < oldest->second.used))
        oldest = it;
    if (oldest == pools_.end()) return;
    for (auto& w : oldest->second.ready) evicted.push_back(std::move(w));
    pools_.erase(oldest);
  }
  pools_.emplace(key, Pool{spec, 1, {}, std::chrono::steady_clock::now(), true});
  refill_cv_.notify_one();
}

Result<std::unique_ptr<Sandbox>> EngineBackend::finish(std::unique_ptr<EngineSandbox> sb,
                                                       const std::string& seed) {
  if (!seed.empty()) {
    // A saved image's files, into the sandbox's own /workspace.
    ExecRequest req;
    req.argv = {"cp", "-a", seed + "/.", sb->spec().workdir() + "/"};
    auto r = sb->exec(req);
    if (!r || r->status() != 0) {
      (void)sb->destroy();
      return Error::make(
          ErrorCode::kFailedPrecondition,
          "copying the saved workspace of image '" + sb->spec().image() +
              "' failed: " + (r ? r->stderr_data.substr(0, 500) : r.error().message()));
    }
  }
  return std::unique_ptr<Sandbox>(std::move(sb));
}

void EngineBackend::refill_loop() {
  std::unique_lock l(mu_);
  while (!stopping_) {
    // The first pool short of its target, in key order.
    auto it = pools_.begin();
    while (it != pools_.end() && it->second.ready.size() >= it->second.target) ++it;
    if (it == pools_.end()) {
      refill_cv_.wait(l);
      continue;
    }
    const std::string key = it->first;
    const SandboxSpec spec = it->second.spec;
    l.unlock();
    const std::string id = new_id();
    auto c = start_container(spec, id);
    l.lock();
    if (!c) {
      spdlog::warn("engine {}: warm pool: {}", shared_->engine_name, c.error().message());
      // Not in a tight loop: an engine that refuses now is asked again later.
      refill_cv_.wait_for(l, std::chrono::seconds(5));
      continue;
    }
    auto pool = pools_.find(key);
    if (stopping_ || pool == pools_.end()) {  // stopping, or the pool gave way meanwhile
      l.unlock();
      c->link->close();
      remove_quietly(c->container_id);
      l.lock();
      continue;
    }
    pool->second.ready.push_back(Warm{id, std::move(*c)});
  }
}

// GET /images/json: every tagged image but sandcastle's own base.
Result<std::vector<BackendImage>> EngineBackend::list_images() {
  auto list = shared_->client->image_list();
  if (!list) return list.take_error();
  std::vector<BackendImage> out;
  if (!list->is_array()) return out;
  for (const auto& img : *list) {
    if (!img.is_object()) continue;
    auto tags = img.find("RepoTags");
    if (tags == img.end() || !tags->is_array()) continue;
    for (const auto& t : *tags) {
      if (!t.is_string()) continue;
      std::string name = t.get<std::string>();
      if (name == kHostBaseImage || name.find("<none>") != std::string::npos) continue;
      BackendImage b;
      b.name = name.substr(0, 256);
      b.id = img.value("Id", std::string()).substr(0, 128);
      if (auto sz = img.find("Size"); sz != img.end() && sz->is_number_unsigned())
        b.size_bytes = sz->get<std::uint64_t>();
      if (auto cr = img.find("Created"); cr != img.end() && cr->is_number_integer())
        b.created_unix = cr->get<std::int64_t>();
      out.push_back(std::move(b));
      if (out.size() >= 10'000) return out;
    }
  }
  return out;
}

std::size_t EngineBackend::warm_ready() const {
  std::lock_guard l(mu_);
  std::size_t n = 0;
  for (const auto& [key, p] : pools_) n += p.ready.size();
  return n;
}

std::size_t EngineBackend::warm_ready_for(const SandboxSpec& spec) const {
  std::lock_guard l(mu_);
  auto it = pools_.find(engine_pool_key(spec));
  return it == pools_.end() ? 0 : it->second.ready.size();
}

void EngineBackend::shutdown() {
  std::deque<Warm> pool;
  {
    std::lock_guard l(mu_);
    if (stopping_ && !refill_.joinable()) return;
    stopping_ = true;
    for (auto& [key, p] : pools_)
      for (auto& w : p.ready) pool.push_back(std::move(w));
    pools_.clear();
  }
  refill_cv_.notify_all();
  if (refill_.joinable()) refill_.join();
  {
    std::unique_lock l(mu_);
    refill_cv_.wait(l, [this] { return creating_ == 0; });
  }
  for (auto& w : pool) {
    w.container.link->close();
    remove_quietly(w.container.container_id);
  }
  if (shared_ && shared_->remover) shared_->remover->shutdown();
  if (!runtime_base_.empty()) {
    (void)native::remove_tree(runtime_base_);
    runtime_base_.clear();
  }
}

}  // namespace sandcastle::sandbox::engine
