// The engine-neutral sandbox interface. The native backend implements it with
// namespaces; a Podman/Docker backend can implement the same calls with
// `exec`, `cp` and `rm -f`.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/spec.h"

namespace sandcastle::sandbox {

// Shared by the caller and a running exec; cancel() ends the exec (its whole
// process tree is killed) and the result says kCancelled. interrupt() sends
// SIGINT to the exec's main process and lets it go on: how a REPL-like
// program is told to stop what it is doing without losing its state. Both
// reach the running exec at once, through the channel its backend set: no
// exec waits by polling the token (a server holds thousands of idle ones).
class CancelToken {
 public:
  // What a backend's channel is asked to deliver.
  enum class Signal : char { kCancel = 'c', kInterrupt = 'i' };

  void cancel() {
    cancelled_.store(true, std::memory_order_release);
    std::lock_guard l(mu_);
    if (channel_) (void)channel_(Signal::kCancel);
  }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // False when no exec runs with this token (or it has ended).
  bool interrupt() const {
    std::lock_guard l(mu_);
    return channel_ && channel_(Signal::kInterrupt);
  }

  // For backends: how to reach the exec that runs with this token now (null
  // when it ends). Set, then check cancelled(): a cancel from before the
  // channel existed is not lost. The channel is not the token's state,
  // hence const.
  void set_channel(std::function<bool(Signal)> fn) const {
    std::lock_guard l(mu_);
    channel_ = std::move(fn);
  }

 private:
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  mutable std::function<bool(Signal)> channel_;
};

// Where every sandbox sees the files its server publishes (publish_shared):
// read-only, the same bytes for all, so a file that every sandbox needs (a
// kernel driver) costs its memory once instead of once per sandbox.
inline constexpr const char* kSharedDir = "/opt/sandcastle";

struct OutputCap {
  // Bytes kept per stream; half from the head, half from the tail.
  std::size_t max_bytes = 1024 * 1024;
};

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // layered over base env and spec env
  std::string cwd;                          // empty = spec workdir
  std::string stdin_data;
  std::optional<std::chrono::milliseconds> timeout;  // empty = spec default
  OutputCap output{};
  // A descriptor of the caller's that the command gets as its fd 3 (-1:
  // none), e.g. one end of a socketpair to talk to the server over. The
  // caller keeps its copy and may close it once the command has started.
  int pass_fd = -1;
};

enum class EndReason { kExited, kTimeout, kOutOfMemory, kKilled, kCancelled };
const char* end_reason_name(EndReason r);

struct ExecResult {
  EndReason reason = EndReason::kExited;
  int exit_code = -1;  // valid when the main process exited
  int signal = 0;      // valid when it was killed by a signal
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::uint64_t stdout_total = 0;  // bytes produced, including dropped ones
  std::uint64_t stderr_total = 0;
  std::chrono::microseconds duration{0};
  std::chrono::microseconds cpu_time{0};
  std::uint64_t peak_memory_bytes = 0;
  // Shell-style status: exit code, or 128+signal.
  int status() const { return signal ? 128 + signal : exit_code; }
};

struct ExecCallbacks {
  // Called from the exec's calling thread as output arrives (not capped).
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
};

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct FileStat {
  std::string name;
  FileType type = FileType::kOther;
  std::uint64_t size = 0;
  std::uint32_t mode = 0;  // permission bits
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;  // a rewrite within the same second still differs
};

struct Usage {
  std::uint64_t memory_bytes = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::chrono::microseconds cpu_time{0};
  std::uint32_t processes = 0;
  std::uint64_t disk_bytes = 0;
  // "cgroup v1" / "cgroup v2" / "rlimits only": where the numbers come from.
  std::string accounting;
};

class Sandbox {
 public:
  virtual ~Sandbox() = default;
  virtual const std::string& id() const = 0;
  virtual const SandboxSpec& spec() const = 0;

  // Thread-safe: several execs may run at once in one sandbox.
  virtual Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks = {},
                                  const CancelToken* cancel = nullptr) = 0;

  // Paths are sandbox paths: absolute, or relative to the spec workdir.
  // Symlinks are resolved inside the sandbox; '..' components are refused.
  virtual Result<FileStat> stat(const std::string& path) = 0;
  virtual Result<std::vector<FileStat>> list(const std::string& path) = 0;
  virtual Result<std::string> read_file(const std::string& path,
                                        std::uint64_t max_bytes = 64 * kMiB) = 0;
  virtual Status write_file(const std::string& path, std::string_view data,
                            std::uint32_t mode = 0644) = 0;
  virtual Status mkdir(const std::string& path, bool parents = true) = 0;
  virtual Status remove(const std::string& path, bool recursive = false) = 0;

  virtual Result<Usage> usage() = 0;

  // A TCP socket listening on 127.0.0.1:`port` (0 = any free port) inside the
  // sandbox's network namespace, for the server to serve on (the package
  // installer's egress proxy). Backends without the ability say kUnavailable.
  virtual Result<UniqueFd> listen_loopback(std::uint16_t /*port*/) {
    return Error::make(ErrorCode::kUnavailable,
                       "this sandbox backend cannot open a loopback listener, so package "
                       "installs have no network path");
  }

  // Writes `name` (no '/') into the directory every sandbox of this backend
  // sees read-only at kSharedDir; an existing file of that name is replaced
  // atomically. Backends without one say kUnavailable.
  virtual Status publish_shared(const std::string& /*name*/, std::string_view /*data*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no shared directory");
  }

  // Kills every process and releases everything; idempotent. Later calls
  // fail with kUnavailable.
  virtual Status destroy() = 0;
};

struct BackendCapabilities {
  bool user_namespaces = false;
  bool cgroup_limits = false;  // memory/pids/cpu enforced by cgroups
  bool seccomp = false;
  bool rootless = false;       // running without host root
  std::string cgroup_version;  // "v1", "v2" or "none"
  std::vector<std::string> notes;  // weakened guarantees, e.g. "memory limit via RLIMIT_DATA"
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual const BackendCapabilities& capabilities() const = 0;
  virtual Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) = 0;
  // A clean exit: destroys every sandbox and removes everything the backend
  // made on the host; create fails afterwards.
  virtual void shutdown() {}
};

}  // namespace sandcastle::sandbox
