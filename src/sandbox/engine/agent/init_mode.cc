#include "sandbox/engine/agent/init_mode.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>

namespace sandcastle::sandbox::engine::agent {
namespace {

void on_signal(int) {}

}  // namespace

int run_init() {
  // As serve: no process of the container's uid may open this one's /proc
  // fds (its stdio is the container's log) or memory. And it holds no
  // stdio at all: it never writes, and nothing may write the log through it.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return 1;
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null < 0) return 1;
  for (int fd = 0; fd <= 2; ++fd)
    if (::dup2(null, fd) < 0) return 1;  // dup2 clears close-on-exec: fine, init never execs
  if (null > 2) ::close(null);
  // Handlers as well as the mask: the kernel drops a signal to a PID 1 that
  // has no handler for it, unless the signal is blocked (then it waits in
  // sigwaitinfo). Both, so neither rule depends on the other.
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) sigaction(sig, &sa, nullptr);
  sigset_t wanted;
  sigemptyset(&wanted);
  for (int sig : {SIGTERM, SIGINT, SIGCHLD}) sigaddset(&wanted, sig);
  pthread_sigmask(SIG_BLOCK, &wanted, nullptr);
  for (;;) {
    // Reap first: children may have exited before the mask was set.
    int status = 0;
    while (::waitpid(-1, &status, WNOHANG) > 0) {
    }
    siginfo_t info;
    int sig = sigwaitinfo(&wanted, &info);
    if (sig == SIGTERM || sig == SIGINT) return 0;
    if (sig < 0 && errno != EINTR) return 1;
  }
}

}  // namespace sandcastle::sandbox::engine::agent
