#include "sandbox/native/terminal_pty.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "sandbox/native/fd_passing.h"

namespace sandcastle::sandbox::native {

std::optional<StepError> open_terminal_pty(const ExecWire& req, int to_supervisor, int* slave) {
  // /dev/ptmx is the sandbox's (a link into its own devpts instance, on a
  // read-only /dev), opened with the command's own credentials.
  int master = ::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master < 0) return step_failed("open /dev/ptmx");
  int unlock = 0;
  struct winsize ws {};
  ws.ws_col = req.pty_cols;
  ws.ws_row = req.pty_rows;
  if (::ioctl(master, TIOCSPTLCK, &unlock) != 0) return step_failed("unlock pty");
  if (::ioctl(master, TIOCSWINSZ, &ws) != 0) return step_failed("size pty");
  // The slave through the master, not by its /dev/pts path.
  int s = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (s < 0) return step_failed("open pty slave");
  // A session leader without a terminal (setsid came first) takes this one.
  if (::ioctl(s, TIOCSCTTY, 0) != 0) return step_failed("make pty the controlling terminal");
  int err = send_with_fds(to_supervisor, "pty", &master, 1);
  ::close(master);
  if (err != 0) return step_failed("send pty master", err);
  *slave = s;
  return std::nullopt;
}

namespace {

// What the command wrote on its error pipe before _exit (supervisor.cc:
// fail_child), or nullopt on EOF: execve closed the pipe.
std::optional<StepError> wait_for_execve(int exec_errors) {
  struct pollfd p = {exec_errors, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, 10'000);
  } while (r < 0 && errno == EINTR);
  if (r == 0) return step_failed("wait for the terminal's execve", ETIMEDOUT);
  if (r < 0) return step_failed("poll exec error pipe");
  char buf[4096];
  ssize_t n;
  do {
    n = ::read(exec_errors, buf, sizeof buf);
  } while (n < 0 && errno == EINTR);
  if (n == 0) return std::nullopt;
  if (n < 0) return step_failed("read exec error pipe");
  WireReader rd(std::string_view(buf, static_cast<std::size_t>(n)));
  StepError e;
  e.err = rd.i32();
  e.step = rd.str();
  if (!rd.ok()) return step_failed("exec setup (garbled report)", EPROTO);
  if (e.err == 0) e.err = EIO;
  return e;
}

}  // namespace

std::optional<StepError> forward_terminal_master(int from_command, int exec_errors, int report_fd) {
  // The command sends it right after its request, before execve; a command
  // that failed closes the socket (EOF). The bound only guards the server's
  // wait against a bug: nothing the sandbox runs is involved yet.
  struct pollfd p = {from_command, POLLIN, 0};
  if (::poll(&p, 1, 10'000) != 1) return std::nullopt;
  char buf[16];
  ReceivedMessage m = recv_with_fds(from_command, buf, sizeof buf);
  if (m.len <= 0 || m.nfds != 1 || m.truncated) {
    m.close_fds();
    return std::nullopt;
  }
  // A bad cwd or a missing program fails after the pty was made: the server
  // must hear that, with its errno, not a terminal that dies at once.
  if (auto e = wait_for_execve(exec_errors)) {
    m.close_fds();
    return e;
  }
  ExecReport rep;
  rep.kind = ReportKind::kTerminal;
  (void)send_with_fds(report_fd, encode(rep), m.fds, 1);
  // Our copy goes now: the server's is the only one outside the command's
  // pty (terminal.h: why no process of the sandbox shares it).
  m.close_fds();
  return std::nullopt;
}

}  // namespace sandcastle::sandbox::native
