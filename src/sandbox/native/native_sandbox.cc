#include "sandbox/native/native_sandbox.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <vector>

#include "common/log.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/file_worker.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
NativeSandbox::NativeSandbox(std::string id, SandboxSpec spec,
                             std::shared_ptr<BackendShared> shared, IdMapping ids,
                             std::shared_ptr<SandboxCgroup> cgroup, InitProcess init)
    : id_(std::move(id)),
      spec_(std::move(spec)),
      shared_(std::move(shared)),
      ids_(ids),
      cgroup_(std::move(cgroup)),
      init_(std::move(init)) {
  shared_->track(this);
}

// Destroyed before it is untracked: a shutdown running meanwhile may still
// call destroy() on it (a no-op then), never on a destructed object.
// release(): dropping the handle keeps a persistent sandbox's files (only
// destroy() removes them).
NativeSandbox::~NativeSandbox() {
  (void)release();
  shared_->untrack(this);
}

Status NativeSandbox::check_alive() const {
  if (destroyed_) return Error::make(ErrorCode::kUnavailable, "sandbox " + id_ + " was destroyed");
  return {};
}

Result<UniqueFd> NativeSandbox::connect_files() {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the file channel");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  std::shared_lock lock(mu_);
  if (auto st = check_alive(); !st) return st.take_error();
  std::string bytes =
      encode_control(ControlKind::kFiles, encode(FilesWire{spec_.limits().file_size_bytes}));
  const int fds[1] = {theirs.get()};
  if (int e = send_with_fds(init_.control.get(), bytes, fds, 1); e != 0)
    return Error::from_errno("send file worker request to sandbox init", e);
  return ours;
}

Result<std::string> NativeSandbox::worker_path(const std::string& path) const {
  auto rel = sandbox_relative_path(path, spec_.workdir());
  if (!rel) return rel.take_error();
  return "/" + *rel;
}

Result<FileStat> NativeSandbox::stat(const std::string& path) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.stat(*p);
}

Result<Listing> NativeSandbox::list(const std::string& path, const ListOptions& options) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  UniqueFd watch;
  auto listing = files_.list(*p, options, &watch);
  if (listing && watch) listing->watch = shared_->change_watches.keep(this, std::move(watch));
  return listing;
}

std::optional<bool> NativeSandbox::changed_since(std::uint64_t watch) {
  return shared_->change_watches.changed(this, watch);
}

Result<FileData> NativeSandbox::read_file(const std::string& path, const ReadRange& range) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  return files_.read(*p, range);
}

Status NativeSandbox::write_file(const std::string& path, std::string_view data, std::uint32_t mode,
                                 bool parents) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to write /");
  if (auto st = files_.write(*p, data, mode, parents); !st) return st;
  return persist_changes();
}

Status NativeSandbox::mkdir(const std::string& path, bool parents) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  if (auto st = files_.mkdir(*p, parents); !st) return st;
  return persist_changes();
}

Status NativeSandbox::remove(const std::string& path, bool recursive) {
  auto p = worker_path(path);
  if (!p) return p.take_error();
  if (*p == "/") return Error::make(ErrorCode::kInvalidArgument, "refusing to operate on /");
  if (auto st = files_.remove(*p, recursive); !st) return st;
  return persist_changes();
}

Status NativeSandbox::rename(const std::string& from, const std::string& to) {
  auto f = worker_path(from);
  if (!f) return f.take_error();
  auto t = worker_path(to);
  if (!t) return t.take_error();
  if (*f == "/" || *t == "/")
    return Error::make(ErrorCode::kInvalidArgument, "refusing to rename /");
  if (auto st = files_.rename(*f, *t); !st) return st;
  return persist_changes();
}

Result<Usage> NativeSandbox::usage() {
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
  }
  Usage u;
  // Disk use and (without a cgroup) the process count are looked up inside
  // the sandbox, like every other look at its tree. Without an answer, the
  // count is init's own: 1 while it lives (its pidfd not yet readable), 0
  // once it has died.
  auto figures = files_.usage();
  if (!figures) {
    std::shared_lock lock(mu_);
    struct pollfd p {init_.pidfd.get(), POLLIN, 0};
    const bool alive = !destroyed_ && init_.pidfd && ::poll(&p, 1, 0) == 0;
    figures = UsageFigures{0, alive ? 1u : 0u};
  }
  u.disk_bytes = figures->disk_bytes;
  if (cgroup_) {
    u.accounting = std::string("cgroup ") + cgroup_version_name(cgroup_->version());
    u.memory_bytes = cgroup_->memory_current();
    u.peak_memory_bytes = cgroup_->memory_peak();
    u.cpu_time = std::chrono::microseconds(cgroup_->cpu_usage_us());
    u.processes = cgroup_->process_count();
  } else {
    u.accounting = "rlimits only";
    u.processes = figures->processes;
  }
  return u;
}

Status NativeSandbox::publish_shared(const std::string& name, std::string_view data) {
  return publish_shared_file(shared_->dirs, name, data);
}

bool NativeSandbox::has_shared(const std::string& name) const {
  if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') return false;
  return ::access((shared_->dirs.share + "/" + name).c_str(), F_OK) == 0;
}

bool NativeSandbox::alive(std::chrono::milliseconds grace) const {
  UniqueFd waited;
  int fd = -1;
  std::shared_lock lock(mu_);
  if (destroyed_ || !init_.pidfd) return false;
  fd = init_.pidfd.get();
  if (grace.count() > 0) {
    // Waited on outside the lock: destroy() must not wait for it.
    waited.reset(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
    if (!waited) return true;
    fd = waited.get();
    lock.unlock();
  }
  struct pollfd p {fd, POLLIN, 0};
  int r;
  while ((r = ::poll(&p, 1, static_cast<int>(grace.count()))) < 0 && errno == EINTR) {
  }
  return r <= 0;  // a poll that failed (ENOMEM) proves nothing dead
}

Status NativeSandbox::destroy() {
  return end(true);
}

Status NativeSandbox::release() {
  return end(false);
}

Status NativeSandbox::end(bool remove_files) {
  UniqueFd exited;
  std::shared_ptr<AttachedDisk> disk;
  std::shared_ptr<MirrorAttachment> mirror;
  bool remove = false;
  // Without root: what background processes wrote since the last call is
  // kept too (a thawed sandbox: a frozen one's worker would wait).
  if (!remove_files) {
    bool running;
    {
      std::shared_lock lock(mu_);
      running = !destroyed_ && mirror_ && !frozen_;
    }
    // (Bounded shortly: a sandbox that stops its own worker delays no release.)
    if (running)
      if (auto st = persist_within(std::chrono::seconds(20)); !st)
        spdlog::warn("native sandbox {}: last copy of its files: {}", id_, st.error().message());
  }
  {
    std::unique_lock lock(mu_);
    if (!destroyed_) {
      destroyed_ = true;
      // Thawed first: in a frozen v1 cgroup even SIGKILL waits for a thaw.
      frozen_.reset();
      if (disk_ && init_.pidfd) exited.reset(::fcntl(init_.pidfd.get(), F_DUPFD_CLOEXEC, 0));
      // SIGKILL to PID 1 now: the kernel kills every process of the sandbox,
      // and with the last one its mounts go. Waiting for that and removing
      // the cgroup happen on the reaper thread, off the caller's path.
      // A persistent sandbox's release waits for the exit (below): at the
      // normal share then.
      shared_->reaper.kill_and_release(id_, std::move(init_), cgroup_, /*background=*/!disk_);
    }
    disk = std::move(disk_);
    mirror = std::move(mirror_);
    if (remove_files && spec_.persistence() == Persistence::kPersistent && !storage_removed_)
      remove = storage_removed_ = true;
  }
  // Outside mu_: a call in progress holds the channel until its worker's
  // death reaches it (at once: the worker died with init).
  files_.close();
  shared_->change_watches.forget(this);
  if (disk) {
    // A persistent sandbox's storage is unmounted once its processes are
    // gone (PID 1 exits after every other process of its namespace), so the
    // caller may start it again at once.
    if (exited) {
      struct pollfd p {exited.get(), POLLIN, 0};
      while (::poll(&p, 1, 30'000) < 0 && errno == EINTR) {
      }
    }
    disk.reset();
  }
  if (mirror) {
    // A sync in progress fails now that init is gone; the storage is free
    // for the next start once it has.
    { std::lock_guard wait(mirror->sync_mu); }
    mirror.reset();
  }
  if (remove)
    return shared_->mirror && ::geteuid() != 0
               ? shared_->mirror->remove(spec_.storage_id(),
                                         [s = shared_](const PersistMirrorWire& w, int a, int b) {
                                           return run_in_helper_sandbox(s, w, a, b);
                                         })
               : shared_->persist->remove(spec_.storage_id());
  return {};
}

Status NativeSandbox::freeze() {
  std::unique_lock lock(mu_);
  if (auto st = check_alive(); !st) return st;
  if (frozen_) return {};
  // Every process, init and file workers too: calls that need them wait
  // for thaw().
  auto f = SaveFreeze::freeze(cgroup_.get(), -1, id_);
  if (!f) return f.take_error();
  frozen_ = std::move(*f);
  return {};
}

Status NativeSandbox::thaw() {
  std::unique_lock lock(mu_);
  if (auto st = check_alive(); !st) return st;
  frozen_.reset();
  return {};
}

Status NativeSandbox::checkpoint(const std::string& /*dir*/) {
  if (auto st = criu_check_once(); !st) return st;
  return Error::make(ErrorCode::kUnavailable, "native backend: checkpoints are not implemented");
}

}  // namespace sandcastle::sandbox::native
