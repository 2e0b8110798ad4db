// The engine backend (issue 17): sandboxes as containers on a Docker or
// Podman engine, driven through its Engine API (engine_client.h), each with
// the agent (agent_wire.h) as PID 1's reaper and one attached agent exec as
// its call channel.
//
// Warm pools of started containers with their agents connected keep the
// engine's container start (hundreds of milliseconds) off the request path:
// one for the spec most creates ask for, and one (of one container) for
// each other spec a create asked for lately, at most kMaxPools in all (the
// least recently used learned one gives way).
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "sandbox/engine/container_config.h"
#include "sandbox/engine/engine_client.h"
#include "sandbox/engine/engine_sandbox.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {

struct EngineBackendOptions {
  EngineOptions engine;
  std::string agent_path;  // the static sandcastle-agent on this host
  // Containers kept started for pool_spec (0: none).
  std::size_t pool_size = 2;
  std::optional<SandboxSpec> pool_spec;
  // Issue 19: accept network mode allowlist (the container is made for it,
  // container_config.h; the caller must then open_net_listeners and serve
  // them). Off until the server does so.
  bool allowlist = false;
};

// The agent binary: $SANDCASTLE_AGENT, else sandcastle-agent next to this
// executable, else the build tree's.
std::string find_agent();

class EngineBackend final : public Backend {
 public:
  static Result<std::unique_ptr<EngineBackend>> create(const EngineBackendOptions& options);
  ~EngineBackend() override;

  std::string name() const override { return "engine"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  std::size_t warm_ready() const override;
  // Containers ready for `spec` (its pool's).
  std::size_t warm_ready_for(const SandboxSpec& spec) const;
  static constexpr std::size_t kMaxPools = 4;
  bool owns_images() const override { return true; }
  Result<std::vector<BackendImage>> list_images() override;
  void shutdown() override;

  const EngineClient& client() const { return *shared_->client; }
  EngineClient& client() { return *shared_->client; }

 private:
  struct Warm {
    std::string id;
    EngineContainer container;
  };
  EngineBackend() = default;
  Status prepare(const EngineBackendOptions& options);
  Result<ContainerPlan> plan_for(const SandboxSpec& spec, const std::string& id);
  Result<EngineContainer> start_container(const SandboxSpec& spec, const std::string& id);
  Result<std::unique_ptr<AgentLink>> connect_agent(const std::string& container_id);
  void remove_quietly(const std::string& container_id);
  void sweep_leftovers();
  Status install_agent();
  void refill_loop();
  std::string new_id();

  std::shared_ptr<EngineShared> shared_;
  BackendCapabilities caps_;
  std::string agent_path_;
  std::string etc_dir_;
  std::string runtime_base_;
  std::string server_tag_;
  bool local_ = false;  // a unix socket: host paths can be bound
  bool podman_ = false;
  bool allowlist_ = false;  // EngineBackendOptions::allowlist
  struct ImageFacts {
    std::string user;
    bool host_root = false;
    std::string workspace_seed;
  };
  std::map<std::string, ImageFacts> image_facts_;  // what plan_for read off each image

  struct Pool {
    SandboxSpec spec;
    std::size_t target = 0;
    std::deque<Warm> ready;
    std::chrono::steady_clock::time_point used;
    bool learned = false;  // made for a create's spec, not the configured one
  };
  void learn(const std::string& key, const SandboxSpec& spec, std::deque<Warm>& evicted);
  Result<std::unique_ptr<Sandbox>> finish(std::unique_ptr<EngineSandbox> sb,
                                          const std::string& seed);
  std::size_t pool_size_ = 0;
  std::map<std::string, Pool> pools_;  // by native::pool_key
  mutable std::mutex mu_;
  std::condition_variable refill_cv_;
  bool stopping_ = false;
  std::size_t creating_ = 0;  // create() calls under way
  std::thread refill_;
};

}  // namespace sandcastle::sandbox::engine
