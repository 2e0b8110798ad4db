#include "sandbox/native/persist_mirror_store.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "sandbox/native/fd_passing.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/persist_disk.h"
#include "sandbox/native/persist_mirror.h"

namespace sandcastle::sandbox::native {
namespace {

constexpr const char* kMirrorDir = "mirror";
constexpr const char* kWorkspaceDir = "workspace";
constexpr const char* kUpperDir = "upper";
constexpr const char* kDiskImage = "disk.img";  // persist_disk.cc's name
// The host /workspace tmpfs has at most this many inodes (host_image.cc).
constexpr std::uint64_t kMaxEntries = 262'144;

Status bad_id(const std::string& id) {
  return Error::make(ErrorCode::kInvalidArgument,
                     "storage id '" + id + "': [a-z0-9-], 1..64 characters");
}

Status in_use(const std::string& id) {
  return Error::make(ErrorCode::kFailedPrecondition,
                     "storage " + id +
                         " is in use by a running sandbox: close it (close_sandbox) or pause "
                         "it (pause_sandbox) first");
}

// One directory the server made, opened without following a link.
Result<UniqueFd> open_own_dir(int parent, const char* name, bool create) {
  if (create && ::mkdirat(parent, name, 0700) != 0 && errno != EEXIST)
    return Error::from_errno(std::string("mkdir ") + name);
  UniqueFd fd(::openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::from_errno(std::string("open ") + name);
  return fd;
}

// The whole reply by `deadline` (a worker that sends a byte at a time
// gets no more time than a stopped one).
Status read_exact(int fd, char* buf, std::size_t n,
                  std::chrono::steady_clock::time_point deadline) {
  while (n > 0) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    int r = left.count() <= 0 ? 0 : ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      return Error::make(ErrorCode::kTimeout,
                         "the sandbox's persist worker did not finish in time (stopped, or too "
                         "slow); it was killed");
    if (r < 0) return Error::from_errno("poll the persist worker");
    ssize_t got = ::recv(fd, buf, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Error::from_errno("read the persist worker's reply");
    if (got == 0)
      return Error::make(ErrorCode::kUnavailable,
                         "the sandbox's persist worker ended without a reply (the sandbox may be "
                         "out of processes, or gone)");
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return {};
}

}  // namespace

std::uint64_t mirror_bound(std::uint64_t disk_bytes) {
  // An eighth more than the limit: directories and symlinks cost nothing
  // on the sandbox's tmpfs but 4 KiB each in the copy, and a workspace near
  // its limit with many of them (node_modules) must still sync.
  return disk_bytes + disk_bytes / 8 + (std::uint64_t{1} << 20);
}

Status refuse_other_kind(const std::string& storage_dir, const std::string& id, bool root) {
  if (storage_dir.empty() || !valid_storage_id(id)) return {};
  const std::string dir = storage_dir + "/" + id;
  struct stat st {};
  if (root && ::lstat((dir + "/" + kMirrorDir).c_str(), &st) == 0)
    return Error::make(ErrorCode::kInvalidArgument,
                       "storage " + id +
                           " was made by a server running without root (a copy of its files, "
                           "not a disk image): a root server cannot open it; run the server "
                           "unprivileged again, or use another sandbox");
  if (!root && ::lstat((dir + "/" + kDiskImage).c_str(), &st) == 0)
    return Error::make(ErrorCode::kInvalidArgument,
                       "storage " + id +
                           " was made by a server running as root (an ext4 disk image): a "
                           "server without root cannot open it; run the server as root "
                           "again, or use another sandbox");
  return {};
}

// Nothing locked here: the last owner may be a temporary of find_attached,
// destroyed while mu_ is held. (find_attached drops expired entries.)
MirrorAttachment::~MirrorAttachment() = default;

Status MirrorStore::usable() const {
  if (storage_dir_.empty())
    return Error::make(
        ErrorCode::kInvalidArgument,
        "persistent sandboxes (kept across server restarts) are not available: this "
        "server has no storage directory for them; omit persistent, or set it to false");
  return {};
}

std::shared_ptr<MirrorAttachment> MirrorStore::find_attached(const std::string& id) {
  auto it = attached_.find(id);
  if (it == attached_.end()) return nullptr;
  auto a = it->second.lock();
  if (!a) attached_.erase(it);
  return a;
}

const char* MirrorStore::kind_of(const std::string& id) const {
  struct stat st {};
  return ::lstat((dir_of(id) + "/" + kMirrorDir + "/" + kUpperDir).c_str(), &st) == 0
             ? kUpperDir
             : kWorkspaceDir;
}

Result<UniqueFd> MirrorStore::open_kept(const std::string& id, const char* kind, bool create) {
  if (create && ::mkdir(storage_dir_.c_str(), 0700) != 0 && errno != EEXIST)
    return Error::from_errno("mkdir " + storage_dir_);
  UniqueFd top(::open(storage_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!top) return Error::from_errno("open " + storage_dir_);
  auto dir = open_own_dir(top.get(), id.c_str(), create);
  if (!dir) return dir.take_error();
  auto mirror = open_own_dir(dir->get(), kMirrorDir, create);
  if (!mirror) return mirror.take_error();
  return open_own_dir(mirror->get(), kind, create);
}

Result<std::shared_ptr<MirrorAttachment>> MirrorStore::attach(const std::string& id, bool image) {
  if (auto st = usable(); !st) return st.take_error();
  if (!valid_storage_id(id)) return bad_id(id).take_error();
  if (auto st = refuse_other_kind(storage_dir_, id, false); !st) return st.take_error();
  std::lock_guard lock(mu_);
  if (find_attached(id) || busy_.count(id)) return in_use(id).take_error();
  const char* kind = image ? kUpperDir : kWorkspaceDir;
  auto ws = open_kept(id, kind, true);
  if (!ws) return ws.take_error();
  std::shared_ptr<MirrorAttachment> a(new MirrorAttachment);
  a->id_ = id;
  a->path_ = dir_of(id) + "/" + kMirrorDir + "/" + kind;
  a->workspace_ = std::move(*ws);
  a->store_ = this;
  attached_[id] = a;
  return a;
}

Status MirrorStore::remove(const std::string& id, const Walker& walk) {
  if (!valid_storage_id(id)) return bad_id(id);
  if (storage_dir_.empty()) return {};
  if (auto st = refuse_other_kind(storage_dir_, id, false); !st) return st;
  {
    std::lock_guard lock(mu_);
    if (find_attached(id) || busy_.count(id)) return in_use(id);
    busy_.insert(id);
  }
  // Walked without mu_ held (a helper sandbox's start, a tree's removal):
  // other storages attach meanwhile; this one is refused while busy.
  struct Done {
    MirrorStore* s;
    const std::string& id;
    ~Done() {
      std::lock_guard lock(s->mu_);
      s->busy_.erase(s->busy_.find(id));
    }
  } done{this, id};
  // Emptied beneath an fd first (the sandbox's names and links, never
  // followed), then the server's own directories.
  auto ws = open_kept(id, kind_of(id), false);
  if (ws) {
    PersistMirrorWire w;
    w.direction = MirrorDirection::kClear;
    if (auto st = walk(w, ws->get(), -1); !st)
      return Error::make(st.error().code, "remove storage " + id + ": " + st.error().message());
  } else if (ws.error().sys_errno != ENOENT) {
    return ws.take_error();
  }
  return remove_tree(dir_of(id));
}

std::vector<std::string> MirrorStore::list() const {
  std::vector<std::string> out;
  if (storage_dir_.empty()) return out;
  for (const auto& name : list_dir(storage_dir_)) {
    struct stat st {};
    if (valid_storage_id(name) && ::lstat(dir_of(name).c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      out.push_back(name);
  }
  return out;
}

Status MirrorStore::copy(const std::string& from, const std::string& to, const Walker& walk) {
  for (const auto* id : {&from, &to})
    if (!valid_storage_id(*id)) return bad_id(*id);
  if (auto st = usable(); !st) return st;
  if (auto st = refuse_other_kind(storage_dir_, from, false); !st) return st;
  std::shared_ptr<MirrorAttachment> running;
  {
    std::lock_guard lock(mu_);
    if (find_attached(to) || busy_.count(to)) return in_use(to);
    running = find_attached(from);
    // `to` is not attached nor removed while it is being made; a source
    // not running is not woken (its restore would race the walk) nor
    // removed meanwhile (a running one's sync_mu is held below).
    busy_.insert(to);
    if (!running) busy_.insert(from);
  }
  struct Done {
    MirrorStore* s;
    std::vector<std::string> ids;
    ~Done() {
      std::lock_guard lock(s->mu_);
      for (const auto& id : ids) s->busy_.erase(s->busy_.find(id));
    }
  } done{this, running ? std::vector<std::string>{to} : std::vector<std::string>{to, from}};
  const char* kind = kind_of(from);
  auto src = open_kept(from, kind, false);
  if (!src) {
    if (src.error().sys_errno == ENOENT)
      return Error::make(ErrorCode::kNotFound, "no storage " + from);
    return src.take_error();
  }
  struct stat before {};
  const bool to_is_new = ::lstat(dir_of(to).c_str(), &before) != 0 && errno == ENOENT;
  auto dst = open_kept(to, kind, true);
  if (!dst) return dst.take_error();
  // A running source: its last completed sync, not one half done.
  std::unique_lock<std::mutex> hold;
  if (running) hold = std::unique_lock(running->sync_mu);
  PersistMirrorWire w;
  w.direction = MirrorDirection::kCopy;
  w.max_bytes = ~std::uint64_t{0};  // the source is bounded already
  w.max_entries = kMaxEntries;
  if (auto st = walk(w, src->get(), dst->get()); !st) {
    // No half copy left as a storage of its own: emptied beneath its fd
    // (a walker's work, as always), then the server's directories.
    if (to_is_new) {
      PersistMirrorWire clear;
      clear.direction = MirrorDirection::kClear;
      if (walk(clear, dst->get(), -1)) (void)remove_tree(dir_of(to));
    }
    return Error::make(st.error().code,
                       "copy storage " + from + " to " + to + ": " + st.error().message());
  }
  return {};
}

// The sandbox's side of it, for NativeSandbox (declared in native_sandbox.h).

Status run_in_helper_sandbox(const std::shared_ptr<BackendShared>& shared,
                             const PersistMirrorWire& w, int store_fd, int other_fd) {
  // A spec no pool serves (its hostname), with the smallest disk: the
  // worker only walks the storage directories it is given.
  SpecOptions o;
  o.limits.disk_bytes = 1 << 20;
  o.hostname = "sc-storage";
  auto spec = SandboxSpec::create(std::move(o));
  if (!spec) return spec.take_error();
  auto begun = shared->begin_sandbox(spec->limits());
  if (!begun) return begun.take_error();
  auto ready = shared->finish_sandbox(std::move(*begun), *spec);
  if (!ready) return ready.take_error();
  NativeSandbox sb(std::move(ready->id), *spec, shared, ready->ids, std::move(ready->cgroup),
                   std::move(ready->init));
  auto st = sb.run_store_worker(w, store_fd, other_fd);
  (void)sb.destroy();
  return st;
}

std::shared_ptr<MirrorAttachment> NativeSandbox::mirror_snapshot() const {
  std::shared_lock lock(mu_);
  return mirror_;
}

Status NativeSandbox::keep_mirror(std::shared_ptr<MirrorAttachment> mirror, bool restore) {
  // Synced from only once restored: a sync (the release of a sandbox whose
  // restore failed, say) would otherwise make the copy on disk as partial
  // as the sandbox's tree.
  if (restore)
    if (auto st = run_mirror_worker(*mirror, true); !st) return st;
  std::unique_lock lock(mu_);
  mirror_ = std::move(mirror);
  return {};
}

Result<ExecResult> NativeSandbox::exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                                       const CancelToken* cancel) {
  auto r = run_exec(req, callbacks, cancel);
  // Whatever the command did, even if it failed, is on disk before the
  // caller hears of it.
  if (auto st = persist_changes(); !st) {
    if (!r) return r;
    return Error::make(st.error().code, "the command ended (status " + std::to_string(r->status()) +
                                            ") but " + st.error().message());
  }
  return r;
}

Status NativeSandbox::run_mirror_worker(const MirrorAttachment& m, bool restore,
                                        std::chrono::milliseconds timeout) {
  PersistMirrorWire w;
  w.direction = restore ? MirrorDirection::kRestore : MirrorDirection::kSave;
  w.max_bytes = mirror_bound(spec_.limits().disk_bytes);
  w.max_entries = kMaxEntries;
  auto st = run_store_worker(w, m.workspace_fd(), -1, timeout);
  if (!st)
    return Error::make(st.error().code,
                       std::string(restore ? "restoring" : "keeping") + " the files of sandbox " +
                           id_ + (restore ? " from disk: " : " on disk: ") + st.error().message());
  return {};
}

Status NativeSandbox::run_store_worker(const PersistMirrorWire& w, int store_fd, int other_fd,
                                       std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) timeout = std::chrono::milliseconds(persist_timeout_ms_.load());
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the persist worker");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st;
    std::string bytes = encode_control(ControlKind::kPersistMirror, encode(w));
    const int fds[3] = {theirs.get(), store_fd, other_fd};
    if (int e = send_with_fds(init_.control.get(), bytes, fds, other_fd >= 0 ? 3 : 2); e != 0)
      return Error::from_errno("send the persist worker request to sandbox init", e);
  }
  theirs.reset();  // the worker's end: EOF if it dies
  // Late: init kills it (no second worker may ever write the same storage
  // beside it; init also kills it before it forks the next one).
  auto give_up = [&](Status st) {
    if (st.error().code == ErrorCode::kTimeout) {
      PersistMirrorWire abort;
      abort.direction = MirrorDirection::kAbort;
      std::shared_lock lock(mu_);
      if (check_alive())
        (void)send_with_fds(init_.control.get(),
                            encode_control(ControlKind::kPersistMirror, encode(abort)), nullptr, 0);
    }
    return st;
  };
  std::uint32_t len = 0;
  if (auto st = read_exact(ours.get(), reinterpret_cast<char*>(&len), sizeof len, deadline); !st)
    return give_up(std::move(st));
  if (len > kMaxMirrorReply)
    return Error::make(ErrorCode::kInternal, "the persist worker sent an oversized reply");
  std::string msg(len, '\0');
  if (auto st = read_exact(ours.get(), msg.data(), len, deadline); !st)
    return give_up(std::move(st));
  auto stats = decode_mirror_stats(msg);
  if (!stats) return Error::make(ErrorCode::kInternal, "the persist worker sent a malformed reply");
  if (stats->err != 0) {
    const ErrorCode code = stats->err == ENOSPC || stats->err == E2BIG
                               ? ErrorCode::kResourceExhausted
                               : ErrorCode::kIo;
    return Error::make(code, stats->message);
  }
  return {};
}

Status NativeSandbox::persist_changes() {
  return persist_within(std::chrono::milliseconds(persist_timeout_ms_.load()));
}

Status NativeSandbox::persist_within(std::chrono::milliseconds timeout) {
  timeout = std::min(timeout, std::chrono::milliseconds(persist_timeout_ms_.load()));
  auto held = mirror_snapshot();
  if (!held) return {};
  MirrorAttachment& m = *held;
  // The writes of the call that asks are complete: a sync that starts
  // after this increment covers them.
  const std::uint64_t want = m.requested.fetch_add(1) + 1;
  std::lock_guard lock(m.sync_mu);
  if (m.done >= want) return {};
  const std::uint64_t covers = m.requested.load();
  if (auto st = run_mirror_worker(m, false, timeout); !st) return st;
  m.done = covers;
  return {};
}

}  // namespace sandcastle::sandbox::native
