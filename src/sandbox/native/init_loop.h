// The init helper's life after setup: PID 1 of the sandbox. It waits for exec
// requests on the control socket and starts one supervisor per exec; it exits
// (taking the whole sandbox with it) when the server closes the socket.
#pragma once

#include <chrono>

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// Each request is one SOCK_SEQPACKET message (see ControlKind in wire.h);
// an exec carries four fds via SCM_RIGHTS: report socket, stdin, stdout,
// stderr; and a fifth when the command is passed one as its fd 3.
constexpr int kExecRequestFds = 4;
constexpr int kExecRequestMaxFds = 5;
constexpr std::size_t kMaxExecRequestBytes = std::size_t{200} * 1024;
// A supervisor's one-byte message on its slot socket once its exec is over
// and its next command process waits: it takes another exec (supervisor.h).
constexpr char kSlotReady = 'r';
// How long a waiting exec slot is kept after the last request.
constexpr std::chrono::milliseconds kSlotIdle{5'000};
// After an exec took the waiting slot, how long init waits for it to end
// before it makes the next one anyway (init_loop.cc).
constexpr std::chrono::milliseconds kRefillAfter{5};

// PID 1's request loop. start() may run before the sandbox is finished (a
// prespawned init); the first exec slot (a supervisor and its waiting
// command process, seccomp loaded) is started once it is, by
// start_first_slot().
class InitLoop {
 public:
  InitLoop();
  ~InitLoop();
  InitLoop(const InitLoop&) = delete;
  InitLoop& operator=(const InitLoop&) = delete;
  // Blocks SIGCHLD (read through a signalfd); `config` must outlive the loop.
  // rw_fd: the image's rw/ dir kept from before pivot_root (-1: none), for
  // save_sandbox's worker only (the loop's other children close it).
  bool start(int control_fd, const InitConfig& config, int rw_fd = -1);
  // Starts the first exec slot. Only once the sandbox is finished: a
  // supervisor's mount namespace is a copy of init's when it was made (its
  // own /proc, exec_proc.h), and would not see what finishing it mounts.
  void start_first_slot();
  // Serves requests until the server closes the control socket.
  int run();

 private:
  struct State;
  State* st_;
};

}  // namespace sandcastle::sandbox::native
