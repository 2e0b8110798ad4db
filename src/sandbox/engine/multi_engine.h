// Several engines as one backend (issue 17, "Several engines"): a fleet of
// EngineBackends, each with a name and a capacity. A create goes to the
// engine that answers, has the image and has the most free capacity (ties:
// the fewest sandboxes); the sandbox stays pinned to it. A health thread
// pings every engine; one that stops answering has its sandboxes reported
// lost (calls fail with kUnavailable naming the engine, alive() is false)
// and takes no creates until it answers again, when the containers of its
// lost sandboxes are removed and it rejoins placement.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/engine/engine_backend.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {

struct EngineSpec {
  std::string name;          // how placement, errors and listings name it
  std::string url;           // unix:///path.sock or tcp://host:port
  std::string tls_dir;       // ca.pem, cert.pem, key.pem (tcp:// only)
  std::size_t capacity = 0;  // most live sandboxes on it (0: no limit of its own)
};

// The engines of `--engine` / sandbox.engine: entries "name=URL" or "URL"
// (named engine1, engine2, ... by position), separated by ',' or newlines.
// `tls` is one directory for every tcp:// engine, or "name=DIR" entries.
// Every engine gets `capacity`. Refuses duplicate names, empty URLs and a
// TLS entry naming no engine (kInvalidArgument).
Result<std::vector<EngineSpec>> parse_engine_list(const std::string& engines,
                                                  const std::string& tls, std::size_t capacity = 0);

struct MultiEngineOptions {
  std::vector<EngineSpec> engines;
  std::string agent_path;
  std::size_t pool_size = 0;  // warm containers per engine, for pool_spec
  std::optional<SandboxSpec> pool_spec;
  std::chrono::milliseconds health_interval{2000};
  std::chrono::milliseconds ping_timeout{1500};
  // How long an engine's answer to "do you have image X" is trusted.
  std::chrono::milliseconds image_cache_ttl{5000};
};

struct Fleet;

class MultiEngineBackend final : public Backend {
 public:
  // Starts with whatever engines answer; one that does not is tried again
  // by the health thread. Fails only on bad options.
  static Result<std::unique_ptr<MultiEngineBackend>> create(const MultiEngineOptions& options);
  ~MultiEngineBackend() override;

  std::string name() const override { return "engine"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  std::size_t warm_ready() const override;
  bool owns_images() const override { return true; }
  Result<std::vector<BackendImage>> list_images() override;
  void shutdown() override;

  struct EngineState {
    std::string name;
    std::string url;
    bool up = false;
    std::size_t live = 0;
    std::size_t capacity = 0;
    std::string why;  // why it is down
  };
  std::vector<EngineState> engines() const;
  // Waits until engine `name` is up (or down) as asked; false on timeout.
  bool wait_for(const std::string& name, bool up, std::chrono::milliseconds timeout) const;
  // Runs a health round now instead of at the next interval.
  void check_soon();

 private:
  MultiEngineBackend() = default;
  void health_loop();

  std::shared_ptr<Fleet> fleet_;
  BackendCapabilities caps_;
  std::thread health_;
};

}  // namespace sandcastle::sandbox::engine
