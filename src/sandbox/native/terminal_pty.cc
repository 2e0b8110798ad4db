#include "sandbox/native/terminal_pty.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <string>

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

bool forward_terminal_master(int from_command, int report_fd) {
  // The command sends it right after its request, before execve; a command
  // that failed closes the socket (EOF). The bound only guards the server's
  // wait against a bug: nothing the sandbox runs is involved yet.
  struct pollfd p = {from_command, POLLIN, 0};
  if (::poll(&p, 1, 10'000) != 1) return false;
  char buf[16];
  ReceivedMessage m = recv_with_fds(from_command, buf, sizeof buf);
  if (m.len <= 0 || m.nfds != 1 || m.truncated) {
    m.close_fds();
    return false;
  }
  ExecReport rep;
  rep.kind = ReportKind::kTerminal;
  int err = send_with_fds(report_fd, encode(rep), m.fds, 1);
  m.close_fds();
  return err == 0;
}

}  // namespace sandcastle::sandbox::native
