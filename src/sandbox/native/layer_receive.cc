// The server's half of save_sandbox's layer (layer_export.h): asks the
// sandbox's init for a layer worker and copies its stream, bounded, into a
// file. The bytes come from the sandbox: every length is checked.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>

#include "sandbox/native/fd_passing.h"
#include "sandbox/native/layer_export.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/save_freeze.h"

namespace sandcastle::sandbox::native {
namespace {

// A worker that sends nothing for this long is given up on.
constexpr int kQuietMs = 60'000;
// The end blocks and pax headers the worker does not count in max_bytes.
constexpr std::uint64_t kSlack = 1 << 20;

Status read_exact(int fd, char* buf, std::size_t n) {
  while (n > 0) {
    struct pollfd p {
      fd, POLLIN, 0
    };
    int r = ::poll(&p, 1, kQuietMs);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      return Error::make(ErrorCode::kTimeout, "the sandbox's layer worker stopped sending");
    if (r < 0) return Error::from_errno("poll the layer stream");
    ssize_t got = ::recv(fd, buf, n, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return Error::from_errno("read the layer stream");
    if (got == 0)
      return Error::make(ErrorCode::kInternal,
                         "the sandbox's layer worker ended before the layer did");
    buf += got;
    n -= static_cast<std::size_t>(got);
  }
  return {};
}

Status write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    ssize_t k = ::write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return Error::from_errno("write the layer file");
    p += k;
    n -= static_cast<std::size_t>(k);
  }
  return {};
}

// The worker's first message: one byte with its credentials, the pid as
// the kernel translated it into ours.
Result<pid_t> read_worker_pid(int fd) {
  struct pollfd p {
    fd, POLLIN, 0
  };
  int r;
  do r = ::poll(&p, 1, kQuietMs);
  while (r < 0 && errno == EINTR);
  if (r == 0) return Error::make(ErrorCode::kTimeout, "the sandbox's layer worker did not start");
  char byte = 0;
  struct iovec iov {
    &byte, 1
  };
  union {
    char buf[CMSG_SPACE(sizeof(struct ucred))];
    struct cmsghdr align;
  } u{};
  struct msghdr msg {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = u.buf;
  msg.msg_controllen = sizeof u.buf;
  ssize_t n;
  do n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
  while (n < 0 && errno == EINTR);
  if (n != 1)
    return Error::make(
        ErrorCode::kInternal,
        "the sandbox's layer worker did not start (the sandbox may be out of processes)");
  for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
      struct ucred cred {};
      std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
      if (cred.pid > 0) return cred.pid;
    }
  }
  return Error::make(ErrorCode::kInternal, "the layer worker's credentials did not arrive");
}

}  // namespace

Result<SavedLayer> NativeSandbox::save_layer(const std::string& tar_path,
                                             const SaveLimits& limits) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for the layer stream");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  const int on = 1;
  if (::setsockopt(ours.get(), SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return Error::from_errno("SO_PASSCRED on the layer stream");
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
    std::string bytes = encode_control(
        ControlKind::kSaveLayer, encode(LayerExportWire{limits.max_bytes, limits.max_entries}));
    const int fds[1] = {theirs.get()};
    if (int e = send_with_fds(init_.control.get(), bytes, fds, 1); e != 0)
      return Error::from_errno("send the layer worker request to sandbox init", e);
  }
  theirs.reset();  // the worker's end: EOF when it exits
  auto worker = read_worker_pid(ours.get());
  if (!worker) return worker.take_error();
  // Everything else in the sandbox stands still while the worker walks.
  std::string note;
  auto frozen = SaveFreeze::freeze(cgroup_.get(), *worker, id_);
  if (!frozen) note = "taken while the sandbox's processes ran (" + frozen.error().message() + ")";
  std::unique_ptr<SaveFreeze> freeze = frozen ? std::move(*frozen) : nullptr;
  const char go = 'g';
  if (::send(ours.get(), &go, 1, MSG_NOSIGNAL) != 1)
    return Error::from_errno("start the layer worker");
  UniqueFd out(::open(tar_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return Error::from_errno("create " + tar_path);
  auto buf = std::make_unique_for_overwrite<char[]>(kMaxLayerChunk);
  std::uint64_t total = 0;
  for (;;) {
    std::uint32_t len = 0;
    if (auto st = read_exact(ours.get(), reinterpret_cast<char*>(&len), sizeof len); !st)
      return st.take_error();
    if (len == 0) {
      freeze.reset();  // thawed as soon as the walk is over
      break;
    }
    if (len > kMaxLayerChunk)
      return Error::make(ErrorCode::kInternal, "the layer worker sent an oversized chunk");
    total += len;
    if (total > limits.max_bytes + kSlack)
      return Error::make(ErrorCode::kResourceExhausted,
                         "the sandbox's changes exceed the image size limit of " +
                             std::to_string(limits.max_bytes) + " bytes (--max-image-bytes)");
    if (auto st = read_exact(ours.get(), buf.get(), len); !st) return st.take_error();
    if (auto st = write_all(out.get(), buf.get(), len); !st) return st.take_error();
  }
  std::uint32_t slen = 0;
  if (auto st = read_exact(ours.get(), reinterpret_cast<char*>(&slen), sizeof slen); !st)
    return st.take_error();
  if (slen > kMaxLayerSummary)
    return Error::make(ErrorCode::kInternal, "the layer worker sent an oversized summary");
  std::string msg(slen, '\0');
  if (auto st = read_exact(ours.get(), msg.data(), slen); !st) return st.take_error();
  auto sum = decode_layer_summary(msg);
  if (!sum) return Error::make(ErrorCode::kInternal, "the layer worker sent a malformed summary");
  if (sum->err != 0) {
    const ErrorCode code =
        sum->err == EFBIG ? ErrorCode::kResourceExhausted : ErrorCode::kFailedPrecondition;
    return Error::make(code, "saving sandbox " + id_ + ": " + sum->message.substr(0, 4096));
  }
  SavedLayer r;
  r.bytes = total;
  r.entries = sum->entries;
  r.skipped = sum->skipped;
  r.unreadable = sum->unreadable;
  for (auto& p : sum->skipped_paths) r.skipped_paths.push_back(p.substr(0, 4096));
  r.whole_root = sum->whole_root;
  r.consistent = note.empty();
  r.note = note;
  return r;
}

}  // namespace sandcastle::sandbox::native
