#include "service/backends.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>

#include "sandbox/engine/engine_backend.h"
#include "sandbox/engine/multi_engine.h"
#include "sandbox/native/doctor.h"
#include "sandbox/refusing_backend.h"

namespace sandcastle::service {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

// Several engines (--engine repeated, or [[engines]]): one backend over all
// of them; a single engine without a capacity is an EngineBackend as before.
std::unique_ptr<sandbox::Backend> make_multi_engine_backend(
    std::vector<sandbox::engine::EngineSpec> engines, const sandbox::SpecOptions& default_spec,
    const sandbox::native::PoolPolicy& pool) {
  sandbox::engine::MultiEngineOptions options;
  options.engines = std::move(engines);
  options.agent_path = sandbox::engine::find_agent();
  options.pool_size = pool.min;
  if (auto spec = sandbox::SandboxSpec::create(default_spec); spec.ok()) options.pool_spec = *spec;
  auto multi = sandbox::engine::MultiEngineBackend::create(options);
  if (!multi.ok()) {
    spdlog::error("engine backend unavailable: {}", multi.error().message());
    return std::make_unique<sandbox::RefusingBackend>("the engine backend could not start: " +
                                                      multi.error().message());
  }
  std::string names;
  for (const auto& e : options.engines) names += (names.empty() ? "" : ", ") + e.name + "=" + e.url;
  spdlog::info("engine backend over {} engines: {}", options.engines.size(), names);
  return std::move(multi).value();
}

std::unique_ptr<sandbox::Backend> make_engine_backend(const config::Config& cfg,
                                                      const sandbox::SpecOptions& default_spec,
                                                      const sandbox::native::PoolPolicy& pool) {
  auto listed = sandbox::engine::parse_engine_list(cfg.engine, cfg.engine_tls_dir);
  if (!listed.ok())
    return std::make_unique<sandbox::RefusingBackend>("the engine backend could not start: " +
                                                      listed.error().message());
  std::vector<sandbox::engine::EngineSpec> engines;
  for (const auto& e : cfg.engines)
    engines.push_back({e.name, e.url, e.tls_dir, static_cast<std::size_t>(e.capacity)});
  for (auto& e : *listed) {
    for (const auto& f : engines)
      if (f.name == e.name)
        return std::make_unique<sandbox::RefusingBackend>(
            "the engine backend could not start: engine name '" + e.name +
            "' is both in [[engines]] and --engine");
    engines.push_back(std::move(e));
  }
  if (engines.size() > 1 || (engines.size() == 1 && engines[0].capacity > 0))
    return make_multi_engine_backend(std::move(engines), default_spec, pool);
  sandbox::engine::EngineBackendOptions options;
  if (engines.empty()) {
    options.engine.url = env_or("DOCKER_HOST", "unix:///var/run/docker.sock");
    options.engine.tls_dir = cfg.engine_tls_dir;
  } else {
    options.engine.url = engines[0].url;
    options.engine.tls_dir = engines[0].tls_dir;
    if (cfg.engines.empty() && cfg.engine_tls_dir.find('=') == std::string::npos)
      options.engine.tls_dir = cfg.engine_tls_dir;  // as before: the one directory, as given
  }
  options.agent_path = sandbox::engine::find_agent();
  options.pool_size = pool.min;
  // Allowlist containers carry a sysctl (ip_unprivileged_port_start=0, so
  // the agent can hold :53): only when callers may ask for the mode.
  options.allowlist = std::find(cfg.network_modes.begin(), cfg.network_modes.end(), "allowlist") !=
                      cfg.network_modes.end();
  if (auto spec = sandbox::SandboxSpec::create(default_spec); spec.ok()) options.pool_spec = *spec;
  auto engine = sandbox::engine::EngineBackend::create(options);
  if (!engine.ok()) {
    spdlog::error("engine backend unavailable: {}", engine.error().message());
    return std::make_unique<sandbox::RefusingBackend>(
        "the engine backend could not start: " + engine.error().message() +
        ". Check that the engine runs and that --engine names its socket");
  }
  return std::move(engine).value();
}

}  // namespace

std::unique_ptr<sandbox::Backend> make_backend(const config::Config& cfg, bool allow_weak,
                                               const sandbox::SpecOptions& default_spec,
                                               const sandbox::native::PoolPolicy& pool,
                                               sandbox::native::ImageResolver images,
                                               const std::string& storage_dir) {
  const std::string& name = cfg.backend;
  if (name == "engine") return make_engine_backend(cfg, default_spec, pool);
  if (name != "native")
    return std::make_unique<sandbox::RefusingBackend>(
        "backend '" + name +
        "' is not available in this build; available backends: native, engine "
        "(set --backend native or INTERPRETER_TYPE=native)");
  auto report = sandbox::native::check_isolation();
  if (!report.adequate && !allow_weak) {
    std::string why;
    for (const auto& p : report.problems) why += (why.empty() ? "" : "; ") + p;
    spdlog::error("isolation is inadequate on this host: {} (see `sandcastle doctor`)", why);
    return std::make_unique<sandbox::RefusingBackend>(
        "this host cannot isolate code safely: " + why +
        ". Run `sandcastle doctor` for details; an operator may start the server with "
        "--allow-weak-isolation to run code anyway");
  }
  for (const auto& w : report.weaknesses) spdlog::warn("isolation weakened: {}", w);
  sandbox::native::NativeBackendOptions options;
  // The one warm pool, below the manager: made for the spec most creates
  // ask for.
  options.pool = pool;
  options.images = std::move(images);
  options.storage_dir = storage_dir;
  if (auto spec = sandbox::SandboxSpec::create(default_spec); spec.ok())
    options.pool_spec = *spec;
  else
    options.pool.min = 0;
  auto native = sandbox::native::NativeBackend::create(options);
  if (!native.ok()) {
    spdlog::error("native backend unavailable: {}", native.error().message());
    return std::make_unique<sandbox::RefusingBackend>(
        "the native sandbox backend could not start: " + native.error().message() +
        ". Run `sandcastle doctor` for details");
  }
  return std::move(native).value();
}

}  // namespace sandcastle::service
