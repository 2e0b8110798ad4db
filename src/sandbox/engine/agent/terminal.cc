#include "sandbox/engine/agent/terminal.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>

namespace sandcastle::sandbox::engine::agent {

AgentPty open_pty(std::uint16_t cols, std::uint16_t rows) {
  AgentPty p;
  auto failed = [&](const char* step) {
    p.err = errno;
    p.step = step;
    p.master.reset();
    p.slave.reset();
    return std::move(p);
  };
  p.master.reset(::open("/dev/ptmx", O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC));
  if (!p.master) return failed("open /dev/ptmx");
  int unlock = 0;
  if (::ioctl(p.master.get(), TIOCSPTLCK, &unlock) != 0) return failed("unlock pty");
  if (!resize_pty(p.master.get(), cols, rows)) return failed("size pty");
  // Through the master, not by a /dev/pts path.
  p.slave.reset(::ioctl(p.master.get(), TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC));
  if (!p.slave) return failed("open pty slave");
  return p;
}

bool resize_pty(int master, std::uint16_t cols, std::uint16_t rows) {
  struct winsize ws {};
  ws.ws_col = cols;
  ws.ws_row = rows;
  return ::ioctl(master, TIOCSWINSZ, &ws) == 0;
}

}  // namespace sandcastle::sandbox::engine::agent
