#include "transport/stdio/stdio_transport.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "common/json_parse.h"
#include "common/result.h"
#include "common/thread_pool.h"
#include "common/unique_fd.h"
#include "mcp/session.h"

namespace sandcastle::transport {

namespace {

// Writes one whole line; a concurrent writer never interleaves with it.
class LineWriter {
 public:
  explicit LineWriter(int fd) : fd_(fd) {}
  void write_line(std::string line) {
    line.push_back('\n');
    std::lock_guard lock(mu_);
    if (broken_) return;
    const char* p = line.data();
    size_t left = line.size();
    while (left > 0) {
      ssize_t n = ::write(fd_, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        // The client went away (EPIPE): nothing more can be said to it.
        spdlog::warn("stdout write failed: {}; dropping further output", errno_text(errno));
        broken_ = true;
        return;
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
  std::mutex mu_;
  bool broken_ = false;
};

// Splits the byte stream into lines, enforcing the size limit without ever
// buffering more than the limit.
class LineReader {
 public:
  explicit LineReader(size_t max) : max_(max) {}

  // Feeds bytes; calls on_line(line) for each complete line and
  // on_oversize(bytes) once for each line that exceeded the limit.
  template <typename OnLine, typename OnOversize>
  void feed(const char* data, size_t n, OnLine&& on_line, OnOversize&& on_oversize) {
    size_t start = 0;
    for (size_t i = 0; i < n; ++i) {
      if (data[i] != '\n') continue;
      append(data + start, i - start);
      finish_line(on_line, on_oversize);
      start = i + 1;
    }
    append(data + start, n - start);
  }

  // At EOF an unterminated last line still counts as a message.
  template <typename OnLine, typename OnOversize>
  void finish(OnLine&& on_line, OnOversize&& on_oversize) {
    if (!buf_.empty() || skipped_ > 0) finish_line(on_line, on_oversize);
  }

 private:
  void append(const char* p, size_t n) {
    if (skipped_ > 0 || buf_.size() + n > max_) {
      if (skipped_ == 0) head_ = buf_.substr(0, kKeep);
      skipped_ += buf_.size() + n;
      // Keep the last bytes: SDKs write "id" last, and the error needs it.
      tail_.append(buf_).append(p, n);
      if (tail_.size() > kKeep) tail_.erase(0, tail_.size() - kKeep);
      if (head_.size() < kKeep) head_.append(p, std::min(n, kKeep - head_.size()));
      buf_.clear();
      return;
    }
    buf_.append(p, n);
  }
  template <typename OnLine, typename OnOversize>
  void finish_line(OnLine& on_line, OnOversize& on_oversize) {
    if (skipped_ > 0) {
      on_oversize(skipped_, head_, tail_);
      head_.clear();
      tail_.clear();
    } else {
      if (!buf_.empty() && buf_.back() == '\r') buf_.pop_back();
      // Blank lines carry no message; skip them quietly.
      if (buf_.find_first_not_of(" \t") != std::string::npos) on_line(buf_);
    }
    buf_.clear();
    skipped_ = 0;
  }

  static constexpr size_t kKeep = 512;
  size_t max_;
  std::string buf_;
  size_t skipped_ = 0;
  std::string head_, tail_;  // the ends of an oversized line
};

// The id of a message too large to parse, found at either end of it (SDKs
// write it last, hand-written clients first), so the client can match the
// error to its request. Null when it cannot be found unambiguously.
mcp::json recover_id(const std::string& head, const std::string& tail) {
  static const std::regex kTail(R"re("id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,200}")\s*\}\s*$)re");
  static const std::regex kHead(
      R"re(^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,200}")\s*,)re");
  std::smatch m;
  if (std::regex_search(tail, m, kTail) || std::regex_search(head, m, kHead)) {
    if (auto id = parse_json(m[1].str(), JsonLimits{256}); id.ok()) return std::move(*id);
  }
  return nullptr;
}

}  // namespace

void block_termination_signals() {
  // Writing to a closed pipe must fail with EPIPE, not kill the server.
  (void)signal(SIGPIPE, SIG_IGN);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
}

namespace {

// Reading stdin is a role, not a thread (leader/follower): the thread that
// read a request that may block (a tool call) hands reading over to a pool
// worker and runs the request itself. The request thus starts on the thread
// the client's write woke, without a wake-up of another thread on its path;
// the next message is read meanwhile by the new reader.
class StdioLoop : public std::enable_shared_from_this<StdioLoop> {
 public:
  StdioLoop(const mcp::Server& server, const StdioOptions& options)
      : options_(options),
        writer_(std::make_shared<LineWriter>(options.out_fd)),
        session_(mcp::Session::create(
            server,
            [w = writer_](const mcp::json& msg) { w->write_line(mcp::dump_message(msg)); })),
        reader_(options.max_line_bytes),
        limits_{options.max_line_bytes},
        buf_(std::size_t{1} << 16) {
    limits_.bytes_setting = "--max-message-bytes";
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigfd_ = UniqueFd(signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK));
    if (!sigfd_) spdlog::warn("signalfd failed: {}; SIGTERM handling degraded", errno_text(errno));
    keep_ = [this](std::function<void()> task) { kept_.push_back(std::move(task)); };
  }

  mcp::Session& session() { return *session_; }

  // Reads on pool threads (whichever holds the role) until input ends;
  // returns why it ended. The calling thread only waits: it must be free to
  // shut the session down while a request still runs.
  std::string run() {
    ElasticPool::shared().submit([self = shared_from_this()] { self->lead(); });
    std::unique_lock lock(mu_);
    done_cv_.wait(lock, [this] { return done_; });
    return reason_;
  }

 private:
  void lead() {
    for (;;) {
      pollfd fds[2] = {{options_.in_fd, POLLIN, 0}, {sigfd_.get(), POLLIN, 0}};
      int n = ::poll(fds, sigfd_ ? 2 : 1, -1);
      if (n < 0) {
        if (errno == EINTR) continue;
        return finish(std::string("poll failed: ") + errno_text(errno));
      }
      if (sigfd_ && (fds[1].revents & POLLIN)) {
        signalfd_siginfo info{};
        if (::read(sigfd_.get(), &info, sizeof info) == sizeof info)
          return finish(info.ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
      }
      if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::read(options_.in_fd, buf_.data(), buf_.size());
      if (got < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        return finish(std::string("stdin read failed: ") + errno_text(errno));
      }
      auto on_line = [this](const std::string& line) { handle_line(line); };
      auto on_oversize = [this](size_t bytes, const std::string& head, const std::string& tail) {
        handle_oversize(bytes, head, tail);
      };
      if (got == 0) {
        reader_.finish(on_line, on_oversize);
        for (auto& task : kept_) ElasticPool::shared().submit(std::move(task));
        kept_.clear();
        return finish("stdin closed");
      }
      reader_.feed(buf_.data(), static_cast<size_t>(got), on_line, on_oversize);
      if (!kept_.empty() && hand_over()) return;
    }
  }

  // Runs the last request read here once a pool worker has taken over
  // reading (the others go to the pool). True when it did; false when every
  // worker is busy, and reading goes on here with all of them in the pool.
  bool hand_over() {
    std::function<void()> last = std::move(kept_.back());
    kept_.pop_back();
    for (auto& task : kept_) ElasticPool::shared().submit(std::move(task));
    kept_.clear();
    std::function<void()> next = [self = shared_from_this()] { self->lead(); };
    if (!ElasticPool::shared().try_submit(next)) {
      ElasticPool::shared().submit(std::move(last));
      return false;
    }
    // From here on another thread reads: nothing of the loop's is touched.
    last();
    return true;
  }

  void finish(std::string reason) {
    std::lock_guard lock(mu_);
    reason_ = std::move(reason);
    done_ = true;
    done_cv_.notify_all();
  }

  void handle_line(const std::string& line) {
    auto msg = parse_json(line, limits_);
    if (msg) {
      session_->handle_json(*msg, keep_);
      return;
    }
    // Over a limit, the id is recovered as for an oversized line, so the
    // client can match the error; a parse error has none (JSON-RPC: null).
    constexpr std::size_t kEnd = 512;
    const mcp::json id = is_json_limit_error(msg.error())
                             ? recover_id(line.substr(0, kEnd),
                                          line.substr(line.size() - std::min(line.size(), kEnd)))
                             : mcp::json(nullptr);
    writer_->write_line(mcp::dump_message(mcp::parse_failure(id, msg.error())));
  }

  void handle_oversize(size_t bytes, const std::string& head, const std::string& tail) {
    writer_->write_line(mcp::dump_message(mcp::make_error(
        recover_id(head, tail), mcp::rpc_error::kInvalidRequest,
        "Invalid Request: message of " + std::to_string(bytes) + " bytes exceeds the limit of " +
            std::to_string(options_.max_line_bytes) + " bytes (--max-message-bytes)")));
  }

  const StdioOptions options_;
  std::shared_ptr<LineWriter> writer_;
  std::shared_ptr<mcp::Session> session_;
  UniqueFd sigfd_;
  // The reading role's state: only the thread holding the role touches it.
  LineReader reader_;
  JsonLimits limits_;
  std::vector<char> buf_;
  std::vector<std::function<void()>> kept_;  // requests read in this chunk
  mcp::Session::Runner keep_;

  std::mutex mu_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::string reason_;
};

}  // namespace

int serve_stdio(const mcp::Server& server, const StdioOptions& options) {
  block_termination_signals();
  auto loop = std::make_shared<StdioLoop>(server, options);
  const std::string reason = loop->run();
  spdlog::info("shutting down: {}", reason);
  mcp::Session& session = loop->session();
  if (!session.shutdown(options.finish_grace, options.cancel_grace))
    spdlog::warn("{} request(s) still running after the grace period; exiting anyway",
                 session.inflight());
  return 0;
}

}  // namespace sandcastle::transport
