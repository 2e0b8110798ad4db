#include "sandbox/engine/agent/file_session.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include "sandbox/native/file_worker.h"

namespace sandcastle::sandbox::engine::agent {
namespace {

// The worker refuses to run while the bounding set still holds
// CAP_SYS_ADMIN (enter_sandbox_context's guard). In a container it is empty
// already; an agent run with capabilities (tests, as root) drops them here.
void drop_bounding_set() {
  for (unsigned long cap = 0; cap < 64; ++cap) {
    int r = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);
    if (r < 0) break;  // past the last capability
    if (r == 1) (void)prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
  }
}

}  // namespace

UniqueFd start_file_worker(std::uint64_t rlimit_fsize, pid_t* pid, AgentFailure& failure) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    failure.err = errno;
    failure.step = "socketpair";
    return UniqueFd();
  }
  pid_t child = ::fork();
  if (child == 0) {
    // Only the channel and stderr stay open: a worker holding the agent's
    // stdout would keep the server's stream open after the agent is gone.
    int sock = ::fcntl(sp[1], F_DUPFD_CLOEXEC, 3);
    if (sock < 0 || ::dup2(sock, 3) < 0) _exit(1);
    if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
      for (int fd = 4; fd < 1024; ++fd) ::close(fd);
    ::close(0);
    ::close(1);
    drop_bounding_set();
    native::FilesWire limits;
    limits.rlimit_fsize = rlimit_fsize;
    native::run_file_worker(3, native::InitConfig{}, limits);
  }
  int err = errno;
  ::close(sp[1]);
  if (child < 0) {
    ::close(sp[0]);
    failure.err = err;
    failure.step = "fork";
    return UniqueFd();
  }
  *pid = child;
  return UniqueFd(sp[0]);
}

}  // namespace sandcastle::sandbox::engine::agent
