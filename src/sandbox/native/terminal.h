// The server's side of a native sandbox's terminal (issue 18). The shell is
// an exec whose command made its own pty pair inside the sandbox
// (terminal_pty.h); the server holds only the master, which crossed from
// the sandbox and so is checked before any use (is_pty_master), and the
// exec's report socket: closing it makes the exec's supervisor kill every
// process the shell started.
#pragma once

#include <chrono>
#include <optional>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

// True only for a pty master open for reading and writing: a character
// device that is a ptmx (5:2) on which TIOCGPTN answers. Pipes, sockets,
// files, a pty's slave, /dev/tty are not.
bool is_pty_master(int fd);

// The first report of a terminal's exec: kTerminal with one fd that is a pty
// master (returned, non-blocking), or the exec's setup error. Anything else
// (another kind, no fd, two fds, a fd that is no pty master) is refused with
// kInternal and every fd received is closed.
Result<UniqueFd> receive_terminal_master(int report_fd, std::chrono::milliseconds timeout);

class NativeTerminal final : public Terminal {
 public:
  NativeTerminal(UniqueFd report, UniqueFd master, TerminalSlots::Lease lease);
  ~NativeTerminal() override;
  NativeTerminal(const NativeTerminal&) = delete;
  NativeTerminal& operator=(const NativeTerminal&) = delete;
  static Result<std::unique_ptr<NativeTerminal>> make(UniqueFd report, UniqueFd master,
                                                      TerminalSlots::Lease lease);

  int fd() const override { return epoll_.get(); }
  Result<std::size_t> read(char* buf, std::size_t cap) override;
  Result<std::size_t> write(std::string_view bytes) override;
  Status resize(std::uint16_t cols, std::uint16_t rows) override;
  std::optional<int> exit_code() override;
  void kill() override;

 private:
  // Takes the exec's report if one waits (or notes the sandbox gone).
  void poll_report();
  void end_output();
  // The master as the server set it up: a sandbox process that shared it
  // could clear O_NONBLOCK and stall the server's reads; refused then.
  //
  // A backstop only: no process of the sandbox keeps the master's open file
  // description. The command opens it close-on-exec, sends it and closes it
  // before anything of the sandbox's runs in it (terminal_pty.cc); the
  // supervisor closes its copy as soon as it is sent, and forks nothing
  // after. While either holds it, neither can be reached: both are
  // non-dumpable and the command is in a Landlock domain of its own
  // (supervisor.cc), so no /proc/<pid>/fd and no pidfd_getfd, and opening
  // /dev/ptmx again makes a new pair. What the sandbox shares is the slave,
  // a separate description. (TerminalTest.NoProcessOfTheSandboxHoldsAMaster)
  Status check_master() const;

  UniqueFd report_;
  UniqueFd master_;
  UniqueFd epoll_;
  TerminalSlots::Lease lease_;
  std::optional<int> status_;  // from the report
  bool kill_sent_ = false;
};

}  // namespace sandcastle::sandbox::native
