#include "sandbox/native/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <mutex>
#include <utility>

#include "sandbox/exec_io.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/init_loop.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kStartTimeout = std::chrono::seconds(10);
// The shell's status when its end was not reported (the sandbox went away,
// or its report was malformed): killed.
constexpr int kKilledStatus = 128 + SIGKILL;

// The ptmx device: every pty master's inode, whichever devpts it is in.
constexpr unsigned kPtmxMajor = 5, kPtmxMinor = 2;

Result<ExecWire> terminal_wire(const TerminalRequest& req, const SandboxSpec& spec,
                               bool have_cgroup) {
  auto cmd = terminal_command(req, spec);
  if (!cmd) return cmd.error();
  ExecWire w;
  w.argv = std::move(cmd->argv);
  w.env = std::move(cmd->env);
  w.cwd = std::move(cmd->cwd);
  w.timeout_ms = cmd->timeout_ms;
  const Limits& l = spec.limits();
  w.rlimit_nofile = l.open_files;
  w.rlimit_fsize = l.file_size_bytes;
  w.rlimit_nproc = l.pids;
  w.rlimit_data = have_cgroup ? 0 : l.memory_bytes;
  w.pty_cols = req.cols;
  w.pty_rows = req.rows;
  return w;
}

Error malformed(const char* what) {
  return Error::make(ErrorCode::kInternal,
                     std::string("terminal: refused from the sandbox: ") + what);
}

}  // namespace

bool is_pty_master(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISCHR(st.st_mode)) return false;
  if (major(st.st_rdev) != kPtmxMajor || minor(st.st_rdev) != kPtmxMinor) return false;
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || (flags & O_ACCMODE) != O_RDWR) return false;
  unsigned n = 0;
  // Only on a ptmx, which the checks above have made it: answers on masters.
  return ::ioctl(fd, TIOCGPTN, &n) == 0;
}

Result<UniqueFd> receive_terminal_master(int report_fd, std::chrono::milliseconds timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      return Error::make(ErrorCode::kTimeout,
                         "terminal: the sandbox did not start the shell in time");
    struct pollfd p = {report_fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno != EINTR) return Error::from_errno("poll terminal report");
    if (r <= 0) continue;
    char buf[8192];
    ReceivedMessage m = recv_with_fds(report_fd, buf, sizeof buf, MSG_DONTWAIT);
    UniqueFd passed(m.nfds == 1 ? std::exchange(m.fds[0], -1) : -1);
    const int nfds = m.nfds;
    m.close_fds();
    if (m.len < 0 && (m.err == EINTR || m.err == EAGAIN)) continue;
    if (m.len <= 0) return Error::make(ErrorCode::kUnavailable, "terminal: the sandbox went away");
    auto rep = decode_report(std::string_view(buf, static_cast<std::size_t>(m.len)));
    if (!rep || m.truncated) return malformed("a malformed report");
    if (rep->kind == ReportKind::kSetupError) {
      if (nfds != 0) return malformed("a setup error with descriptors");
      return Error::from_errno("terminal: " + rep->step, rep->err);
    }
    if (rep->kind != ReportKind::kTerminal) return malformed("a report other than the pty");
    if (nfds != 1) return malformed("not exactly one descriptor with the pty");
    if (!is_pty_master(passed.get())) return malformed("a descriptor that is no pty master");
    int flags = ::fcntl(passed.get(), F_GETFL);
    if (flags < 0 || ::fcntl(passed.get(), F_SETFL, flags | O_NONBLOCK) != 0)
      return Error::from_errno("terminal: make the pty non-blocking");
    return passed;
  }
}

NativeTerminal::NativeTerminal(UniqueFd report, UniqueFd master, TerminalSlots::Lease lease)
    : report_(std::move(report)), master_(std::move(master)), lease_(std::move(lease)) {}

Result<std::unique_ptr<NativeTerminal>> NativeTerminal::make(UniqueFd report, UniqueFd master,
                                                             TerminalSlots::Lease lease) {
  // One descriptor to wait on: level-triggered, readable while either is.
  UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep) return Error::from_errno("terminal: epoll_create1");
  for (int fd : {report.get(), master.get()}) {
    struct epoll_event ev {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, fd, &ev) != 0)
      return Error::from_errno("terminal: epoll_ctl");
  }
  auto t = std::make_unique<NativeTerminal>(std::move(report), std::move(master), std::move(lease));
  t->epoll_ = std::move(ep);
  return t;
}

NativeTerminal::~NativeTerminal() {
  // The supervisor reads EOF as "stop now": SIGKILL to every process of the
  // shell's PID namespace.
  report_.reset();
}

void NativeTerminal::poll_report() {
  if (!report_) return;
  char buf[8192];
  ReceivedMessage m = recv_with_fds(report_.get(), buf, sizeof buf, MSG_DONTWAIT);
  const int nfds = m.nfds;
  m.close_fds();
  if (m.len < 0 && (m.err == EINTR || m.err == EAGAIN)) return;
  std::optional<ExecReport> rep;
  if (m.len > 0 && !m.truncated && nfds == 0)
    rep = decode_report(std::string_view(buf, static_cast<std::size_t>(m.len)));
  if (rep && rep->kind == ReportKind::kDone) {
    int st = rep->wait_status;
    status_ = WIFEXITED(st)     ? WEXITSTATUS(st)
              : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                : kKilledStatus;
  } else {
    status_ = kKilledStatus;  // EOF (the sandbox went away) or a malformed report
  }
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, report_.get(), nullptr);
  report_.reset();
}

void NativeTerminal::end_output() {
  if (!master_) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, master_.get(), nullptr);
  master_.reset();
}

Status NativeTerminal::check_master() const {
  int flags = ::fcntl(master_.get(), F_GETFL);
  if (flags < 0 || !(flags & O_NONBLOCK))
    return Error::make(ErrorCode::kInternal,
                       "terminal: the pty's flags were changed from the sandbox");
  return {};
}

Result<std::size_t> NativeTerminal::read(char* buf, std::size_t cap) {
  poll_report();
  if (!master_ || cap == 0) return std::size_t{0};
  if (auto st = check_master(); !st) {
    end_output();
    return st.take_error();
  }
  for (;;) {
    ssize_t n = ::read(master_.get(), buf, cap);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n < 0 && errno == EINTR) continue;
    // Every process the shell started is dead once the report came: what the
    // pty held has been read (a slave passed to another exec of the sandbox
    // does not keep the terminal open).
    if (n < 0 && errno == EAGAIN && !status_) return std::size_t{0};
    // EIO: the last slave closed (Linux's EOF on a pty master).
    end_output();
    return std::size_t{0};
  }
}

Result<std::size_t> NativeTerminal::write(std::string_view bytes) {
  if (!master_) return Error::make(ErrorCode::kUnavailable, "terminal: the shell has ended");
  if (auto st = check_master(); !st) return st.take_error();
  for (;;) {
    ssize_t n = ::write(master_.get(), bytes.data(), bytes.size());
    if (n >= 0) return static_cast<std::size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return std::size_t{0};
    return Error::from_errno("terminal: write to the pty");
  }
}

Status NativeTerminal::resize(std::uint16_t cols, std::uint16_t rows) {
  if (cols == 0 || rows == 0)
    return Error::make(ErrorCode::kInvalidArgument, "terminal: cols and rows must be positive");
  if (!master_) return Error::make(ErrorCode::kUnavailable, "terminal: the shell has ended");
  struct winsize ws {};
  ws.ws_col = cols;
  ws.ws_row = rows;
  // On the master: the kernel sends SIGWINCH to the foreground group.
  if (::ioctl(master_.get(), TIOCSWINSZ, &ws) != 0)
    return Error::from_errno("terminal: resize the pty");
  return {};
}

std::optional<int> NativeTerminal::exit_code() {
  poll_report();
  if (master_) return std::nullopt;  // output still to read
  return status_;
}

void NativeTerminal::kill() {
  // Once, and never waiting: a supervisor that stopped reading (frozen, or
  // taken over) must not block the server's thread. A cancel that does not
  // fit is not lost: the destructor's close is the same order.
  if (!report_ || kill_sent_) return;
  kill_sent_ = true;
  (void)!::send(report_.get(), "c", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
}

Result<std::unique_ptr<Terminal>> NativeSandbox::open_terminal(const TerminalRequest& req) {
  auto wire = terminal_wire(req, spec_, cgroup_ != nullptr);
  if (!wire) return wire.take_error();
  std::string bytes = encode_control(ControlKind::kExec, encode(*wire));
  if (bytes.size() > kMaxExecRequestBytes)
    return Error::make(ErrorCode::kInvalidArgument, "terminal: argv and env too large");
  auto lease = terminals_.acquire();
  if (!lease) return lease.take_error();

  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for terminal report");
  UniqueFd report(sp[0]), report_remote(sp[1]);
  // The exec's stdio: unused (the pty replaces it), the server's /dev/null.
  UniqueFd null(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!null) return Error::from_errno("open /dev/null");
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
    const int fds[kExecRequestFds] = {report_remote.get(), null.get(), null.get(), null.get()};
    if (int e = send_with_fds(init_.control.get(), bytes, fds, kExecRequestFds); e != 0)
      return Error::from_errno("send terminal request to sandbox init",
                               e == ECONNRESET ? EPIPE : e);
  }
  report_remote.reset();
  null.reset();
  auto master = receive_terminal_master(report.get(), kStartTimeout);
  if (!master) return master.take_error();
  auto t = NativeTerminal::make(std::move(report), std::move(*master), std::move(*lease));
  if (!t) return t.take_error();
  return std::unique_ptr<Terminal>(std::move(*t));
}

}  // namespace sandcastle::sandbox::native
