// sandcastle-init: the helper the server execs inside the sandbox's fresh
// namespaces. A separate, single-threaded program, so the setup below may use
// ordinary C++ instead of the async-signal-safe subset a forked child of the
// multithreaded server is limited to.
//
// Inherited fds: 3 = config socket (u32 length + encoded InitConfig, later
// u32 length + encoded FinishConfig), 4 = status pipe (an InitStatus after
// each), 5 = control socket (exec and listen requests).
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <string>

#include "sandbox/native/caps.h"
#include "sandbox/native/init_loop.h"
#include "sandbox/native/mounts.h"
#include "sandbox/native/net.h"
#include "sandbox/native/wire.h"
#include "sandbox/native/zygote.h"

using namespace sandcastle::sandbox::native;

namespace {

constexpr int kConfigFd = 3;
constexpr int kStatusFd = 4;
constexpr int kControlFd = 5;

bool read_all(int fd, void* buf, std::size_t n) {
  char* p = static_cast<char*>(buf);
  while (n > 0) {
    ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// u32 length + bytes.
std::optional<StepError> read_message(int fd, std::string& out) {
  std::uint32_t len = 0;
  if (!read_all(fd, &len, sizeof len) || len > (1u << 20)) return step_failed("read config length", EPROTO);
  out.assign(len, '\0');
  if (!read_all(fd, out.data(), len)) return step_failed("read config", EPROTO);
  return std::nullopt;
}

int report(const StepError& e) {
  InitStatus st{};
  st.err = e.err == 0 ? EIO : e.err;
  std::strncpy(st.step, e.step.c_str(), sizeof st.step - 1);
  (void)!::write(kStatusFd, &st, sizeof st);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // sandcastle-init --zygote <helper>: the server's zygote (see zygote.h).
  if (argc == 3 && std::strcmp(argv[1], "--zygote") == 0) {
    sigset_t none;
    sigemptyset(&none);
    pthread_sigmask(SIG_SETMASK, &none, nullptr);
    return run_zygote(3, argv[2]);
  }
  // The server passed no stdio; fill 0-2 so later fds never land there.
  for (int fd = ::open("/dev/null", O_RDWR); fd >= 0 && fd < 3; fd = ::open("/dev/null", O_RDWR)) {
  }
  for (int fd : {kConfigFd, kStatusFd, kControlFd}) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  prctl(PR_SET_NAME, "sandcastle-init", 0, 0, 0);
  // Default dispositions for every signal, once: execve keeps ignored
  // signals ignored (the server may ignore SIGPIPE), and init and the
  // supervisors install no handlers, so every command starts from these.
  // (EINVAL for SIGKILL, SIGSTOP and glibc's reserved ones: nothing to reset.)
  for (int sig = 1; sig < NSIG; ++sig) (void)signal(sig, SIG_DFL);
  // Die with the server; set again because exec may have cleared it.
  prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);

  std::string bytes;
  if (auto e = read_message(kConfigFd, bytes)) return report(*e);
  auto config = decode_init_config(bytes);
  if (!config) return report(step_failed("decode config", EPROTO));

  // Setup order. Steps 1-7 depend on nothing in the sandbox's spec and may
  // run long before the sandbox is asked for (a prespawned init).
  // 1. Supplementary groups inherited from the server are dropped (refused
  //    when the unprivileged path had to deny setgroups: then they are the
  //    invoking user's own groups anyway).
  if (::setgroups(0, nullptr) != 0 && errno != EPERM) return report(step_failed("setgroups"));
  // 1b. A session of our own, without the server's controlling terminal (if
  //     it has one): nothing in the sandbox has a terminal but a terminal
  //     exec's own, and a command needs only a process group of its own, not
  //     a session (setsid makes a scheduler autogroup each time).
  if (::setsid() < 0) return report(step_failed("setsid"));
  // 2. Not dumpable: commands share our uid, and this keeps them from
  //    ptrace-attaching to or reading /proc of init and the supervisors.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return report(step_failed("set non-dumpable"));
  // 3. The filesystem: base plan, pivot_root, old root detached.
  int rw_fd = -1;
  if (auto e = build_root_filesystem(*config, &rw_fd)) return report(*e);
  // 4. Network: loopback only.
  if (auto e = bring_loopback_up()) return report(*e);
  // 5. Empty bounding and ambient sets: init keeps what it needs (nested
  //    PID namespaces, low ports), no command can regain anything.
  if (auto e = drop_bounding_and_ambient()) return report(*e);
  // 6. The request loop (its first exec slot comes once the sandbox is
  //    finished, 8b).
  InitLoop loop;
  if (!loop.start(kControlFd, *config, rw_fd)) return report(step_failed("signalfd"));
  // 7. Prepared.
  InitStatus ok{};
  if (::write(kStatusFd, &ok, sizeof ok) != static_cast<ssize_t>(sizeof ok)) return 1;

  // The spec's part, when the sandbox is created.
  if (auto e = read_message(kConfigFd, bytes)) return report(*e);
  ::close(kConfigFd);
  auto finish = decode_finish_config(bytes);
  if (!finish) return report(step_failed("decode finish config", EPROTO));
  // 8. Sized tmpfs mounts, then /dev and / read-only.
  if (auto e = finish_root_filesystem(*finish)) return report(*e);
  // 8b. Every exec's mount namespace (its own /proc, exec_proc.h) is a copy
  //     of ours that receives what is mounted here later (a persistent
  //     sandbox's storage, over /workspace); the first exec slot, made now,
  //     sees the finished sandbox.
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_SHARED, nullptr) != 0)
    return report(step_failed("make the mounts shared with the execs"));
  loop.start_first_slot();
  // 9. Identity of the machine.
  if (::sethostname(finish->hostname.data(), finish->hostname.size()) != 0)
    return report(step_failed("sethostname"));
  // 10. Ready.
  if (::write(kStatusFd, &ok, sizeof ok) != static_cast<ssize_t>(sizeof ok)) return 1;
  ::close(kStatusFd);
  return loop.run();
}
