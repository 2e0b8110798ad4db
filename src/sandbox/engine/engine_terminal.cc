// EngineSandbox::open_terminal (issue 18): a shell on a pty the agent opens
// inside the container (agent_wire.h: AgentExec::pty_rows). The pty's bytes
// travel as one channel of the agent's stream, so the server holds a plain
// socket (the link's end of the channel) and the exec's waiter; nothing of
// the container's is opened here. The agent's window bounds what is in
// flight: a reader that stops reading stops the shell's output at the pty.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "sandbox/engine/engine_sandbox.h"
#include "sandbox/exec_io.h"

namespace sandcastle::sandbox::engine {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kTerminalStartTimeout = std::chrono::seconds(10);
constexpr int kKilledStatus = 128 + SIGKILL;

Result<AgentExec> terminal_exec(const TerminalRequest& req, const SandboxSpec& spec) {
  auto cmd = terminal_command(req, spec);
  if (!cmd) return cmd.error();
  AgentExec e;
  e.argv = std::move(cmd->argv);
  e.env = std::move(cmd->env);
  e.cwd = std::move(cmd->cwd);
  e.timeout_ms = cmd->timeout_ms;
  e.rlimit_nofile = spec.limits().open_files;
  e.rlimit_fsize = spec.limits().file_size_bytes;
  e.pty_cols = req.cols;
  e.pty_rows = req.rows;
  return e;
}

class EngineTerminal final : public Terminal {
 public:
  EngineTerminal(std::shared_ptr<TerminalLink> link, std::uint32_t id, std::uint32_t channel,
                 UniqueFd io, std::shared_ptr<AgentLink::Waiter> waiter, UniqueFd epoll,
                 TerminalSlots::Lease lease)
      : link_(std::move(link)),
        id_(id),
        channel_(channel),
        io_(std::move(io)),
        waiter_(std::move(waiter)),
        epoll_(std::move(epoll)),
        lease_(std::move(lease)) {}

  ~EngineTerminal() override {
    std::lock_guard l(link_->mu);
    if (!link_->link) return;
    // The agent kills the shell's session and what it can tie to it.
    if (!status_) (void)link_->link->send_control(encode_signal(id_, AgentSignal::kCancel));
    link_->link->unwatch(id_);
    link_->link->drop(channel_);
  }

  int fd() const override { return epoll_.get(); }

  Result<std::size_t> read(char* buf, std::size_t cap) override {
    poll_done();
    if (!io_ || cap == 0) return std::size_t{0};
    for (;;) {
      ssize_t n = ::recv(io_.get(), buf, cap, MSG_DONTWAIT);
      if (n > 0) return static_cast<std::size_t>(n);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return std::size_t{0};
      end_output();  // EOF: the agent closed the channel (the pty's EIO)
      return std::size_t{0};
    }
  }

  Result<std::size_t> write(std::string_view bytes) override {
    if (!io_ || status_)
      return Error::make(ErrorCode::kUnavailable, "terminal: the shell has ended");
    for (;;) {
      ssize_t n = ::send(io_.get(), bytes.data(), bytes.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return std::size_t{0};
      return Error::from_errno("terminal: write to the agent's channel");
    }
  }

  Status resize(std::uint16_t cols, std::uint16_t rows) override {
    if (cols == 0 || rows == 0)
      return Error::make(ErrorCode::kInvalidArgument, "terminal: cols and rows must be positive");
    std::lock_guard l(link_->mu);
    if (!link_->link || status_)
      return Error::make(ErrorCode::kUnavailable, "terminal: the shell has ended");
    return link_->link->send_control(encode_resize(id_, cols, rows));
  }

  std::optional<int> exit_code() override {
    poll_done();
    if (io_) return std::nullopt;
    return status_;
  }

  void kill() override {
    std::lock_guard l(link_->mu);
    if (link_->link && !status_)
      (void)link_->link->send_control(encode_signal(id_, AgentSignal::kCancel));
  }

 private:
  void poll_done() {
    if (status_) return;
    while (auto m = waiter_->pop()) {
      if (m->kind != AgentMsg::kDone) continue;
      int st = m->done->wait_status;
      status_ = WIFEXITED(st)     ? WEXITSTATUS(st)
                : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                  : kKilledStatus;
    }
    if (!status_ && waiter_->dead()) status_ = kKilledStatus;  // the container went away
    if (status_) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, waiter_->fd(), nullptr);
  }
  void end_output() {
    if (!io_) return;
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, io_.get(), nullptr);
    io_.reset();
  }

  std::shared_ptr<TerminalLink> link_;
  std::uint32_t id_;
  std::uint32_t channel_;
  UniqueFd io_;
  std::shared_ptr<AgentLink::Waiter> waiter_;
  UniqueFd epoll_;
  TerminalSlots::Lease lease_;
  std::optional<int> status_;
};

}  // namespace

Result<std::unique_ptr<Terminal>> EngineSandbox::open_terminal(const TerminalRequest& req) {
  auto wire = terminal_exec(req, spec_);
  if (!wire) return wire.take_error();
  auto lease = terminals_.acquire();
  if (!lease) return lease.take_error();
  if (auto st = check_alive(); !st) return st.take_error();
  AgentLink& link = *container_.link;
  AgentExec& e = *wire;
  e.id = link.next_id();
  auto ch = link.open_channel();
  if (!ch) return ch.take_error();
  e.ch_stdin = ch->first;
  UniqueFd io = std::move(ch->second);
  auto waiter = link.watch(e.id);
  auto forget = [&] {
    link.unwatch(e.id);
    link.drop(e.ch_stdin);
  };
  if (auto st = link.send_control(encode_exec(e), {e.ch_stdin}); !st) {
    forget();
    return st.take_error();
  }
  // kStarted or kExecFailed; a kDone may follow a fast exit at once.
  auto deadline = Clock::now() + kTerminalStartTimeout;
  for (bool started = false; !started;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      (void)link.send_control(encode_signal(e.id, AgentSignal::kCancel));
      forget();
      return Error::make(ErrorCode::kTimeout,
                         "terminal: the container's agent did not start the shell in time");
    }
    struct pollfd p = {waiter->fd(), POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(left));
    auto m = waiter->pop();
    if (!m) {
      if (waiter->dead()) {
        forget();
        return Error::make(ErrorCode::kUnavailable,
                           "terminal: sandbox " + id_ + " went away (" + link.end_reason() + ")");
      }
      continue;
    }
    if (m->kind == AgentMsg::kExecFailed) {
      forget();
      return Error::from_errno("terminal: " + m->failure->step, m->failure->err);
    }
    started = m->kind == AgentMsg::kStarted;
  }
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) {
    (void)link.send_control(encode_signal(e.id, AgentSignal::kCancel));
    forget();
    return Error::from_errno("terminal: epoll_create1");
  }
  for (int fd : {io.get(), waiter->fd()}) {
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      // A terminal its relay could not wait on would never wake it.
      auto err = Error::from_errno("terminal: epoll_ctl");
      (void)link.send_control(encode_signal(e.id, AgentSignal::kCancel));
      forget();
      return err;
    }
  }
  return std::unique_ptr<Terminal>(
      std::make_unique<EngineTerminal>(terminal_link_, e.id, e.ch_stdin, std::move(io),
                                       std::move(waiter), std::move(ep), std::move(*lease)));
}

}  // namespace sandcastle::sandbox::engine
