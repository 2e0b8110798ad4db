#include "sandbox/native/file_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "sandbox/native/change_watches.h"
#include "sandbox/native/fd_passing.h"

namespace sandcastle::sandbox::native {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of one recv into the call's buffer (message headers, entries).
constexpr std::size_t kRecvBatch = std::size_t{64} * 1024;
// The longest type name a kNotRegular reply may carry.
constexpr std::size_t kMaxTypeName = 32;

Error protocol_error(const std::string& what) {
  return Error::make(ErrorCode::kInternal,
                     "the sandbox's file worker sent a malformed reply (" + what + ")");
}

}  // namespace

Result<std::string> sandbox_relative_path(const std::string& path, const std::string& workdir) {
  if (path.empty()) return Error::make(ErrorCode::kInvalidArgument, "empty path");
  if (path.find('\0') != std::string::npos)
    return Error::make(ErrorCode::kInvalidArgument, "path contains NUL");
  if (path.size() > kMaxFilePath - 1)
    return Error::make(ErrorCode::kInvalidArgument, "path too long");
  std::string full = path.front() == '/' ? path : workdir + "/" + path;
  std::string out;
  std::size_t i = 0;
  while (i < full.size()) {
    std::size_t j = full.find('/', i);
    if (j == std::string::npos) j = full.size();
    std::string comp = full.substr(i, j - i);
    i = j + 1;
    if (comp.empty() || comp == ".") continue;
    if (comp == "..")
      return Error::make(ErrorCode::kInvalidArgument, "path '" + path + "': '..' is not allowed");
    if (!out.empty()) out += '/';
    out += comp;
  }
  for (const char* banned : {"proc", "dev", "sys"}) {
    std::string b = banned;
    if (out == b || out.starts_with(b + "/"))
      return Error::make(ErrorCode::kPermissionDenied,
                         "path '" + path + "': /" + b + " is not accessible");
  }
  return out;
}

// One call's I/O on the channel: everything waits with the call's deadline,
// and every length read from the worker is bounded before it is used.
class FileChannel::Call {
 public:
  Call(int fd, Clock::time_point deadline) : fd_(fd), deadline_(deadline) {}

  Status send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) {
        if (auto st = wait(POLLOUT); !st) return st;
        continue;
      }
      return Error::from_errno("send to the sandbox's file worker");
    }
    return {};
  }

  // One framed message of at most kMaxFileMessage bytes.
  Result<std::string> message() {
    std::uint32_t len = 0;
    if (auto st = read_exact(reinterpret_cast<char*>(&len), sizeof len); !st)
      return st.take_error();
    if (len > kMaxFileMessage)
      return protocol_error("a message of " + std::to_string(len) + " bytes");
    std::string m(len, '\0');
    if (auto st = read_exact(m.data(), len); !st) return st.take_error();
    return m;
  }

  Status read_exact(char* dst, std::size_t n) {
    while (n > 0) {
      if (pos_ < buf_.size()) {
        std::size_t take = std::min(n, buf_.size() - pos_);
        std::memcpy(dst, buf_.data() + pos_, take);
        pos_ += take;
        dst += take;
        n -= take;
        continue;
      }
      // Large reads go straight to their destination; small ones batch.
      const bool direct = n >= kRecvBatch;
      if (!direct) {
        buf_.resize(kRecvBatch);
        pos_ = 0;
      }
      auto m =
          recv_with_fds(fd_, direct ? dst : buf_.data(), direct ? n : kRecvBatch, MSG_DONTWAIT);
      keep_passed(m);
      const ssize_t got = m.len;
      errno = m.err;
      if (!direct) buf_.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
      if (got > 0) {
        any_ = true;
        if (direct) {
          dst += got;
          n -= static_cast<std::size_t>(got);
        }
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && errno == EAGAIN) {
        if (auto st = wait(POLLIN); !st) return st;
        continue;
      }
      gone_ = true;
      return Error::make(ErrorCode::kUnavailable, "the sandbox's file worker went away");
    }
    return {};
  }

  // The worker closed the channel before saying anything in this call: an
  // idle worker that left, or one that never started.
  bool gone_silently() const { return gone_ && !any_; }

  // The first fd the worker attached in this call (a listing's watch).
  UniqueFd take_passed() { return std::move(passed_); }

 private:
  // Only one fd is ever expected in a call: any other is closed.
  void keep_passed(ReceivedMessage& m) {
    if (m.nfds > 0 && !passed_) {
      passed_.reset(m.fds[0]);
      m.fds[0] = -1;
    }
    m.close_fds();
  }

  Status wait(short events) {
    for (;;) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
      if (left <= 0)
        return Error::make(ErrorCode::kTimeout, "the sandbox's file worker did not answer within " +
                                                    std::to_string(kCallTimeout.count()) + " s");
      struct pollfd p {
        fd_, events, 0
      };
      int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 60'000)));
      if (r < 0 && errno != EINTR) return Error::from_errno("poll the sandbox's file worker");
      if (r > 0) return {};
    }
  }

  int fd_;
  Clock::time_point deadline_;
  std::string buf_;
  std::size_t pos_ = 0;
  bool any_ = false;
  bool gone_ = false;
  UniqueFd passed_;
};

namespace {

// A reply's failure as the caller's error.
Error reply_error(const FileReply& r, const std::string& path) {
  if (r.status == FileStatus::kNotRegular) {
    std::string type = r.step.substr(0, kMaxTypeName);
    for (char& c : type)
      if (c < ' ' || c > '~') c = '?';
    return Error::make(ErrorCode::kFailedPrecondition,
                       path + " is a " + type + "; file tools read and write regular files only");
  }
  if (r.err <= 0 || r.err > 4095) return protocol_error("an error without a valid errno");
  return Error::from_errno(r.step, r.err);
}

Result<FileStat> entry_to_stat(std::string_view bytes) {
  auto e = decode_file_entry(bytes);
  if (!e) return protocol_error("an invalid entry");
  FileStat f;
  f.name = std::move(e->name);
  f.type = static_cast<FileType>(e->type);
  f.size = e->size;
  f.mode = e->mode;
  f.mtime_sec = e->mtime_sec;
  f.mtime_nsec = e->mtime_nsec;
  return f;
}

}  // namespace

template <typename T, typename F>
Result<T> FileChannel::transact(const FileRequest& req, std::string_view data, F&& read_reply) {
  std::lock_guard l(mu_);
  const std::string head = frame(encode(req));
  for (int attempt = 0;; ++attempt) {
    const bool fresh = !conn_;
    if (fresh) {
      auto c = connect_();
      if (!c) return c.take_error();
      conn_ = std::move(*c);
    }
    Call call(conn_.get(), Clock::now() + kCallTimeout);
    // A failed send still leaves a reply to read: a worker that could not
    // start says why before it goes.
    Status sent = call.send(head);
    if (sent && !data.empty()) sent = call.send(data);
    auto msg = call.message();
    if (!msg) {
      conn_.reset();
      if (call.gone_silently() && !fresh && attempt == 0) continue;  // the idle worker had left
      if (call.gone_silently())
        return Error::make(
            ErrorCode::kUnavailable,
            "the sandbox's file worker did not start (is the sandbox at its process limit?)");
      return msg.take_error();
    }
    auto reply = decode_file_reply(*msg);
    if (!reply) {
      conn_.reset();
      return protocol_error("an invalid reply header");
    }
    if (!sent) {
      conn_.reset();
      if (reply->status != FileStatus::kOk) return reply_error(*reply, req.path);
      return sent.take_error();
    }
    Result<T> out = read_reply(call, *reply);
    // Out of step (or lied): the next call starts a new worker.
    if (!out.ok() && out.error().code == ErrorCode::kInternal) conn_.reset();
    if (!out.ok() &&
        (out.error().code == ErrorCode::kTimeout || out.error().code == ErrorCode::kUnavailable))
      conn_.reset();
    return out;
  }
}

Result<FileStat> FileChannel::stat(const std::string& path) {
  FileRequest req;
  req.op = FileOp::kStat;
  req.path = path;
  return transact<FileStat>(req, {}, [&](Call& call, const FileReply& r) -> Result<FileStat> {
    if (r.status != FileStatus::kOk) return reply_error(r, path);
    if (r.count != 1) return protocol_error("a stat without its entry");
    auto m = call.message();
    if (!m) return m.take_error();
    auto st = entry_to_stat(*m);
    if (st) st->name = path == "/" ? "/" : path.substr(path.rfind('/') + 1);
    return st;
  });
}

Result<Listing> FileChannel::list(const std::string& path, const ListOptions& options,
                                  UniqueFd* watch) {
  FileRequest req;
  req.op = FileOp::kList;
  req.path = path;
  req.length = options.max_entries;
  req.flags = options.recursive ? kFileRecursive : 0;
  if (options.recursive && options.watch && watch) req.flags |= kFileWatch;
  req.skip = options.skip;
  return transact<Listing>(req, {}, [&](Call& call, const FileReply& r) -> Result<Listing> {
    if (r.status != FileStatus::kOk) return reply_error(r, path);
    if (r.count > options.max_entries) return protocol_error("more entries than asked for");
    // Kept only when asked for, said, and really an inotify instance.
    if (UniqueFd fd = call.take_passed();
        fd && r.watching && (req.flags & kFileWatch) && is_inotify_fd(fd.get()))
      *watch = std::move(fd);
    Listing out;
    out.truncated = r.truncated;
    out.entries.reserve(static_cast<std::size_t>(r.count));
    for (std::uint64_t i = 0; i < r.count; ++i) {
      auto m = call.message();
      if (!m) return m.take_error();
      auto st = entry_to_stat(*m);
      if (!st) return st.take_error();
      if (!options.recursive && st->name.find('/') != std::string::npos)
        return protocol_error("a nested entry in a flat listing");
      out.entries.push_back(std::move(*st));
    }
    return out;
  });
}

Result<FileData> FileChannel::read(const std::string& path, const ReadRange& range) {
  FileRequest req;
  req.op = FileOp::kRead;
  req.path = path;
  req.offset = range.offset;
  req.length = range.length;
  req.flags = range.whole ? kFileWhole : 0;
  return transact<FileData>(req, {}, [&](Call& call, const FileReply& r) -> Result<FileData> {
    FileData out;
    out.size = r.size;
    if (r.status == FileStatus::kTooLarge) {
      if (!range.whole) return protocol_error("too large for a partial read");
      out.too_large = true;
      return out;
    }
    if (r.status != FileStatus::kOk) return reply_error(r, path);
    const std::uint64_t expect =
        r.size > range.offset ? std::min(r.size - range.offset, range.length) : 0;
    out.data.reserve(static_cast<std::size_t>(expect));
    for (;;) {
      std::uint32_t n = 0;
      if (auto st = call.read_exact(reinterpret_cast<char*>(&n), sizeof n); !st)
        return st.take_error();
      if (n == 0) break;
      if (n > range.length - out.data.size()) return protocol_error("more bytes than asked for");
      const std::size_t at = out.data.size();
      out.data.resize(at + n);
      if (auto st = call.read_exact(out.data.data() + at, n); !st) return st.take_error();
    }
    return out;
  });
}

Status FileChannel::command(FileOp op, const std::string& path, std::uint32_t flags,
                            std::string_view data, std::uint32_t mode, const std::string& to) {
  FileRequest req;
  req.to = to;
  req.op = op;
  req.path = path;
  req.length = data.size();
  req.mode = mode & 07777;
  req.flags = flags;
  auto r = transact<bool>(req, data, [&](Call&, const FileReply& rep) -> Result<bool> {
    if (rep.status != FileStatus::kOk) return reply_error(rep, path);
    return true;
  });
  if (!r) return r.take_error();
  return {};
}

Status FileChannel::write(const std::string& path, std::string_view data, std::uint32_t mode,
                          bool parents) {
  return command(FileOp::kWrite, path, parents ? kFileParents : 0, data, mode);
}

Status FileChannel::mkdir(const std::string& path, bool parents) {
  return command(FileOp::kMkdir, path, parents ? kFileParents : 0);
}

Status FileChannel::remove(const std::string& path, bool recursive) {
  return command(FileOp::kRemove, path, recursive ? kFileRecursive : 0);
}

Status FileChannel::rename(const std::string& from, const std::string& to) {
  return command(FileOp::kRename, from, 0, {}, 0, to);
}

Result<UsageFigures> FileChannel::usage() {
  FileRequest req;
  req.op = FileOp::kUsage;
  req.path = "/";
  return transact<UsageFigures>(req, {}, [&](Call&, const FileReply& rep) -> Result<UsageFigures> {
    if (rep.status != FileStatus::kOk) return reply_error(rep, "/");
    if (rep.count > UINT32_MAX) return protocol_error("a process count out of range");
    return UsageFigures{rep.size, static_cast<std::uint32_t>(rep.count)};
  });
}

void FileChannel::close() {
  std::lock_guard l(mu_);
  conn_.reset();
}

}  // namespace sandcastle::sandbox::native
