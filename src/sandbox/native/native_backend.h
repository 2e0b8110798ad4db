// The native backend: sandboxes built from Linux namespaces, seccomp,
// cgroups and rlimits directly, with no container engine.
//
//   auto backend = NativeBackend::create();          // once per server
//   auto sb = (*backend)->create(SandboxSpec::defaults());
//   auto r = (*sb)->exec({.argv = {"/bin/echo", "hi"}});
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

struct BackendShared;

struct NativeBackendOptions {
  // Empty: $SANDCASTLE_INIT, then "sandcastle-init" next to /proc/self/exe,
  // then the build-tree path compiled in.
  std::string init_helper_path;
  // Sandboxes made ahead of demand for prespawn_spec (namespaces, cgroup,
  // running init, mounts): a create whose spec asks for the same mounts and
  // hostname takes one and only adjusts its cgroup limits; any other spec is
  // built from scratch. Each costs an idle helper process and an empty
  // network namespace. 0 = every create starts from scratch.
  std::size_t prespawn = 2;
  SandboxSpec prespawn_spec = SandboxSpec::defaults();
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

 private:
  explicit NativeBackend(std::shared_ptr<BackendShared> shared);
  std::shared_ptr<BackendShared> shared_;
};

// Path of the init helper that would be used (for doctor and errors).
std::string find_init_helper(const std::string& override_path = {});

}  // namespace sandcastle::sandbox::native
