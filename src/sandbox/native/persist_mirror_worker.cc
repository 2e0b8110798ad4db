// The persist worker's side of persist_mirror.h: the wire messages, the
// worker init forks (run_persist_mirror) and the restore child an image
// sandbox's init runs before its overlay is mounted.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "sandbox/native/caps.h"
#include "sandbox/native/file_wire.h"
#include "sandbox/native/file_worker.h"
#include "sandbox/native/persist_mirror.h"

namespace sandcastle::sandbox::native {

std::string encode(const PersistMirrorWire& w) {
  WireWriter o;
  o.u32(static_cast<std::uint32_t>(w.direction));
  o.u64(w.max_bytes);
  o.u64(w.max_entries);
  return o.bytes();
}

std::optional<PersistMirrorWire> decode_persist_mirror(std::string_view bytes) {
  WireReader r(bytes);
  PersistMirrorWire w;
  const std::uint32_t d = r.u32();
  w.max_bytes = r.u64();
  w.max_entries = r.u64();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  if (d < static_cast<std::uint32_t>(MirrorDirection::kSave) ||
      d > static_cast<std::uint32_t>(MirrorDirection::kAbort))
    return std::nullopt;
  w.direction = static_cast<MirrorDirection>(d);
  return w;
}

std::string encode(const MirrorStats& s) {
  WireWriter o;
  o.i32(s.err);
  o.str(s.message.substr(0, 4096));
  for (std::uint64_t v :
       {s.entries, s.copied_files, s.copied_bytes, s.removed, s.skipped, s.total_bytes})
    o.u64(v);
  return o.bytes();
}

std::optional<MirrorStats> decode_mirror_stats(std::string_view bytes) {
  WireReader r(bytes);
  MirrorStats s;
  s.err = r.i32();
  s.message = r.str();
  s.entries = r.u64();
  s.copied_files = r.u64();
  s.copied_bytes = r.u64();
  s.removed = r.u64();
  s.skipped = r.u64();
  s.total_bytes = r.u64();
  if (!r.ok() || !r.at_end() || s.message.size() > 4096) return std::nullopt;
  return s;
}

namespace {

bool send_all(int sock, const std::string& bytes) {
  const char* p = bytes.data();
  std::size_t n = bytes.size();
  while (n > 0) {
    ssize_t k = ::send(sock, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return true;
}

// The worker's memory, whatever the tree: a pass holds each directory's
// name once and each pending entry's name (<= 262,144 entries of <= 255
// bytes, a few hundred MiB at worst), so 1 GiB of data is ample; an
// unprivileged server may have no cgroup to bound it otherwise.
// (Not under the sanitizers: their shadow memory is data too.)
constexpr rlim_t kWorkerData = rlim_t{1} << 30;

bool bound_memory() {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return true;
#else
  const struct rlimit data { kWorkerData, kWorkerData };
  const struct rlimit as { 4 * kWorkerData, 4 * kWorkerData };
  return ::setrlimit(RLIMIT_DATA, &data) == 0 && ::setrlimit(RLIMIT_AS, &as) == 0;
#endif
}

[[noreturn]] void reply(int sock, const MirrorStats& s) {
  (void)send_all(sock, frame(encode(s)));
  _exit(s.err == 0 ? 0 : 1);
}

}  // namespace

std::optional<StepError> restore_mirror_at_mount(const InitConfig& config, const std::string& src,
                                                 const std::string& dst, std::uint64_t max_bytes) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return step_failed("pipe for the restore of " + dst);
  pid_t pid = ::fork();
  if (pid < 0) return step_failed("fork for the restore of " + dst);
  if (pid == 0) {
    ::close(pipefd[0]);
    MirrorStats s;
    // (Init drops its bounding set only after the mounts: this child first.)
    if (drop_bounding_and_ambient() || !enter_sandbox_context(config, FilesWire{}, "sc-restore") ||
        !bound_memory()) {
      s.err = EPERM;
    } else {
      int from = ::open(src.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      int to = ::open(dst.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (from < 0 || to < 0)
        s.err = errno;
      else if ((s.err = recover_staging(from)) == 0)
        s = mirror_tree(from, to, MirrorLimits{max_bytes, 262'144});  // as the syncs bound it
    }
    const std::int32_t err = s.err;
    (void)!::write(pipefd[1], &err, sizeof err);
    _exit(err == 0 ? 0 : 1);
  }
  ::close(pipefd[1]);
  std::int32_t err = EPROTO;
  ssize_t n;
  do n = ::read(pipefd[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n != sizeof err) err = EPROTO;
  if (err != 0) return step_failed("restore the sandbox's files into " + dst, err);
  return std::nullopt;
}

[[noreturn]] void run_persist_mirror(int sock, int store_fd, int other_fd, int rw_fd,
                                     const InitConfig& config, const PersistMirrorWire& w) {
  MirrorStats s;
  if (!enter_sandbox_context(config, FilesWire{}, "sc-persist")) {
    s.err = EPERM;
    s.message = "persist worker: enter the sandbox's context";
    reply(sock, s);
  }
  ::alarm(600);
  if (!bound_memory()) {
    s.err = errno;
    s.message = "persist worker: bound its memory";
    reply(sock, s);
  }
  MirrorLimits limits{w.max_bytes, w.max_entries};
  if (w.direction == MirrorDirection::kClear) {
    s.err = clear_tree(store_fd);
    if (s.err)
      s.message = std::string("persist worker: clear the storage: ") + mirror_err_text(s.err);
    reply(sock, s);
  }
  if (w.direction == MirrorDirection::kCopy) {
    if (other_fd < 0) {
      s.err = EINVAL;
      s.message = "persist worker: no storage to copy to";
      reply(sock, s);
    }
    // The source's unfinished sync (a kill mid-pass) first put right.
    if ((s.err = recover_staging(store_fd)) != 0) {
      s.message = std::string("persist worker: recover the storage: ") + mirror_err_text(s.err);
      reply(sock, s);
    }
    reply(sock, mirror_tree(store_fd, other_fd, limits));
  }
  // An image sandbox: its overlay's upper dir (/workspace is in it), beneath
  // init's kept rw/ fd. Image "host": /workspace in the worker's (the
  // sandbox's) view, a mount of its own, so no RESOLVE_NO_XDEV for it.
  int ws = rw_fd >= 0 ? mirror_open_beneath(rw_fd, "upper", O_RDONLY | O_DIRECTORY)
                      : ::open("/workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (ws < 0) {
    s.err = errno;
    s.message =
        rw_fd >= 0 ? "persist worker: open the upper dir" : "persist worker: open /workspace";
    reply(sock, s);
  }
  if (w.direction == MirrorDirection::kRestore && (s.err = recover_staging(store_fd)) != 0) {
    s.message = std::string("persist worker: recover the storage: ") + mirror_err_text(s.err);
    reply(sock, s);
  }
  s = w.direction == MirrorDirection::kSave ? mirror_tree(ws, store_fd, limits)
                                            : mirror_tree(store_fd, ws, limits);
  reply(sock, s);
}

}  // namespace sandcastle::sandbox::native
