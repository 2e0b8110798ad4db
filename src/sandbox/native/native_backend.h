// The native backend: sandboxes built from Linux namespaces, seccomp,
// cgroups and rlimits directly, with no container engine.
//
//   auto backend = NativeBackend::create();          // once per server
//   auto sb = (*backend)->create(SandboxSpec::defaults());
//   auto r = (*sb)->exec({.argv = {"/bin/echo", "hi"}});
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "sandbox/native/image_root.h"
#include "sandbox/native/pool_sizer.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

struct BackendShared;

struct NativeBackendOptions {
  // Empty: $SANDCASTLE_INIT, then "sandcastle-init" next to /proc/self/exe,
  // then the build-tree path compiled in.
  std::string init_helper_path;
  // The warm pool: sandboxes made ahead of demand for pool_spec (namespaces,
  // cgroup, running init, mounts), handed out only to a create whose whole
  // spec equals pool_spec; any other spec is built from scratch. How many:
  // PoolPolicy (pool.min = 0: none at all, not even an init).
  PoolPolicy pool{};
  SandboxSpec pool_spec = SandboxSpec::defaults();
  // Time as the pool sizer sees it (tests move it by hand); empty: the
  // steady clock.
  std::function<std::chrono::steady_clock::time_point()> clock;
  // Images a spec may name besides "host" (store_resolver() over the image
  // store); empty: "host" only. A pool_spec naming an image pools sandboxes
  // on it (a create takes one only while the store's image keeps its id).
  ImageResolver images;
  // Where persistent sandboxes keep their files (persist_disk.h): one
  // directory per storage id holding its disk.img. Empty: persistent specs
  // are refused. The server passes <state dir>/sandboxes.
  std::string storage_dir;
};

class NativeBackend : public Backend {
 public:
  // Probes the host, writes the /etc template, compiles the seccomp filter
  // and starts the spawner thread. Fails when user namespaces are unusable.
  static Result<std::unique_ptr<NativeBackend>> create(NativeBackendOptions options = {});
  ~NativeBackend() override;

  std::string name() const override { return "native"; }
  const BackendCapabilities& capabilities() const override;
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  // Also run by the destructor, even while sandboxes are still held.
  void shutdown() override;
  std::size_t warm_ready() const override;
  void set_ahead_command(std::optional<AheadCommand> command) override;
  // Issue 16 (persist_disk.h).
  Status checkpoint_support() const override;
  Result<std::unique_ptr<Sandbox>> restore(const SandboxSpec& spec,
                                           const std::string& dir) override;
  Status copy_storage(const std::string& from, const std::string& to) override;
  Status remove_storage(const std::string& id) override;
  std::vector<std::string> list_storage() const override;

  PoolStats pool_stats() const;
  // Waits until `done(stats)` holds (checked whenever the pool changes) or
  // `timeout` passes; returns whether it held.
  bool wait_pool(const std::function<bool(const PoolStats&)>& done,
                 std::chrono::milliseconds timeout) const;
  // Makes the refill look at the pool again now (after a test moved the clock).
  void pool_wake();

 private:
  explicit NativeBackend(std::shared_ptr<BackendShared> shared);
  Result<std::unique_ptr<Sandbox>> create_from_image(const SandboxSpec& spec);
  std::shared_ptr<BackendShared> shared_;
};

// Path of the init helper that would be used (for doctor and errors).
std::string find_init_helper(const std::string& override_path = {});

}  // namespace sandcastle::sandbox::native
