// One native sandbox: a long-lived init (PID 1 in its namespaces) that starts
// each exec as a fork, plus the host-side handles: pidfd, control socket,
// cgroup and an O_PATH fd on the sandbox root for file operations.
#pragma once

#include <atomic>
#include <memory>
#include <shared_mutex>
#include <string>

#include "sandbox/native/cgroup.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/spawn.h"
#include "sandbox/native/userns.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

struct BackendShared {
  RuntimeDirs dirs;
  CgroupSupport cgroups;
  std::string seccomp_bpf;
  std::string helper_path;
  BackendCapabilities caps;
  Spawner spawner;
  std::atomic<std::uint64_t> serial{0};
  ~BackendShared();
};

class NativeSandbox : public Sandbox {
 public:
  NativeSandbox(std::string id, SandboxSpec spec, std::shared_ptr<BackendShared> shared, IdMapping ids,
                std::unique_ptr<SandboxCgroup> cgroup, InitProcess init, UniqueFd root);
  ~NativeSandbox() override;

  const std::string& id() const override { return id_; }
  const SandboxSpec& spec() const override { return spec_; }

  Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                          const CancelToken* cancel) override;

  Result<FileStat> stat(const std::string& path) override;
  Result<std::vector<FileStat>> list(const std::string& path) override;
  Result<std::string> read_file(const std::string& path, std::uint64_t max_bytes) override;
  Status write_file(const std::string& path, std::string_view data, std::uint32_t mode) override;
  Status mkdir(const std::string& path, bool parents) override;
  Status remove(const std::string& path, bool recursive) override;

  Result<Usage> usage() override;
  Result<UniqueFd> listen_loopback(std::uint16_t port) override;
  Status destroy() override;

  // Host pid of the sandbox init (tests and diagnostics).
  pid_t init_pid() const { return init_.pid; }

 private:
  Status check_alive() const;
  template <typename F>
  auto with_root(F&& f) -> decltype(f(0));

  std::string id_;
  SandboxSpec spec_;
  std::shared_ptr<BackendShared> shared_;
  IdMapping ids_;
  std::unique_ptr<SandboxCgroup> cgroup_;
  InitProcess init_;
  UniqueFd root_;
  // Shared: exec sends and file ops. Exclusive: destroy.
  mutable std::shared_mutex mu_;
  bool destroyed_ = false;
};

}  // namespace sandcastle::sandbox::native
