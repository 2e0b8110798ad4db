#include "sandbox/engine/agent/command.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/landlock.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "sandbox/engine/agent/own_net.h"
#include "sandbox/engine/agent/proc_tree.h"
#include "sandbox/engine/agent/terminal.h"

namespace sandcastle::sandbox::engine::agent {
namespace {

enum Step : std::int32_t {
  kSetsid,
  kDup2,
  kCloseRange,
  kSetrlimit,
  kChdir,
  kExecve,
  kSigaction,
  kListen,
  kLandlock,
  kCtty,
  kSeccomp,
  kFork
};

// The keeper's one message: 'P' and the command's pid (an int32).
constexpr char kCommandPidMark = 'P';
constexpr std::size_t kCommandPidSize = 1 + sizeof(std::int32_t);

// What the child writes on its error pipe when a step fails.
struct ChildReport {
  std::int32_t step = 0;
  std::int32_t err = 0;
};

// Above every fd number the child assigns (0-4), so no dup2 below
// overwrites a source it still needs.
constexpr int kHighFd = 10;

// bash -c lowers it again when it execs the program in its place.
constexpr char kShlvl[] = "SHLVL=0";

struct Prepared {
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::string> candidates;  // paths execve tries, in order
  // shell_env (as the native supervisor's add_shell_env): envp ends in
  // PWD, SHLVL=0 and _, filled in by the child (PWD after its chdir, _ per
  // candidate) from buffers made here.
  bool shell_env = false;
  std::size_t pwd_slot = 0;              // envp index of "PWD="
  std::string pwd;                       // "PWD=" and room for PATH_MAX
  std::vector<std::string> underscores;  // "_=<candidate>", one per candidate
  struct Limit {
    int resource;
    rlim_t value;
  };
  std::vector<Limit> limits;
  int close_upto = 0;  // the fallback when close_range is not allowed
  OwnNetPlan net;      // port 0: the container's network
};

std::string env_value(const std::vector<std::string>& env, std::string_view key) {
  for (const auto& kv : env)
    if (kv.size() > key.size() && kv.compare(0, key.size(), key) == 0 && kv[key.size()] == '=')
      return kv.substr(key.size() + 1);
  return {};
}

// argv[0] without a '/' is looked up in the PATH of the command's own
// environment (execvpe would use the agent's), so the candidates are
// spelled out here, before the fork.
Prepared prepare(const AgentExec& e, bool own_net) {
  Prepared p;
  if (own_net) p.net = plan_own_net(e.listen_port);
  for (const auto& a : e.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  for (const auto& kv : e.env) p.envp.push_back(const_cast<char*>(kv.c_str()));
  const std::string& file = e.argv[0];
  if (file.find('/') != std::string::npos) {
    p.candidates.push_back(file);
  } else {
    std::string path = env_value(e.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= path.size()) {
      std::size_t end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      p.candidates.push_back((dir.empty() ? "." : dir) + "/" + file);
      start = end + 1;
    }
  }
  if (e.shell_env) {
    p.shell_env = true;
    p.pwd.assign(4 + PATH_MAX + 1, '\0');
    p.pwd.replace(0, 4, "PWD=");
    p.pwd_slot = p.envp.size();
    // Pointers into `p` itself are set in the child (p moves before that).
    p.envp.push_back(nullptr);  // PWD
    p.envp.push_back(const_cast<char*>(kShlvl));
    p.envp.push_back(nullptr);  // _, per candidate
    for (const auto& c : p.candidates) p.underscores.push_back("_=" + c);
  }
  p.envp.push_back(nullptr);
  p.limits.push_back({RLIMIT_CORE, 0});
  if (e.rlimit_nofile) p.limits.push_back({RLIMIT_NOFILE, static_cast<rlim_t>(e.rlimit_nofile)});
  if (e.rlimit_fsize) p.limits.push_back({RLIMIT_FSIZE, static_cast<rlim_t>(e.rlimit_fsize)});
  if (e.rlimit_nproc) p.limits.push_back({RLIMIT_NPROC, static_cast<rlim_t>(e.rlimit_nproc)});
  if (e.rlimit_data) p.limits.push_back({RLIMIT_DATA, static_cast<rlim_t>(e.rlimit_data)});
  struct rlimit nofile {};
  getrlimit(RLIMIT_NOFILE, &nofile);
  p.close_upto = nofile.rlim_cur > 65536 ? 65536 : static_cast<int>(nofile.rlim_cur);
  return p;
}

// A Landlock domain of the command's own, as the native backend gives every
// command: all commands of a sandbox run as one uid, which alone lets one
// reach into another's processes (ptrace, /proc/<pid>/mem, environ, fd,
// pidfd_getfd); in a domain of its own a process gets such access only to
// its domain and those nested in it. So no other program of the sandbox can
// take over the installer, the one with a way out. The ruleset handles only
// block device creation, which no command can do anyway: it is there for
// the domain. No Landlock in the kernel, or a seccomp profile that refuses
// it: the step is left out. errno on failure.
bool enter_own_landlock_domain() {
  struct landlock_ruleset_attr attr {};
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
  long ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
  if (ruleset < 0) return errno == ENOSYS || errno == EOPNOTSUPP || errno == EPERM;
  // Needed to restrict oneself without CAP_SYS_ADMIN (engines set it anyway).
  long r = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  if (r == 0) r = syscall(SYS_landlock_restrict_self, ruleset, 0U);
  int err = errno;
  ::close(static_cast<int>(ruleset));
  errno = err;
  return r == 0;
}

[[noreturn]] void fail(int error_fd, Step step, int err) {
  ChildReport r{step, err};
  (void)!::write(error_fd, &r, sizeof r);
  _exit(127);
}

// Lowers a limit; without CAP_SYS_RESOURCE a hard limit below the value
// cannot be raised, so the value is clamped to it (as the native backend does).
bool set_limit(int resource, rlim_t value) {
  struct rlimit lim {
    value, value
  };
  if (setrlimit(resource, &lim) == 0) return true;
  struct rlimit cur {};
  if (errno == EPERM && getrlimit(resource, &cur) == 0 && cur.rlim_max != RLIM_INFINITY &&
      cur.rlim_max < value) {
    lim = {cur.rlim_max, cur.rlim_max};
    return setrlimit(resource, &lim) == 0;
  }
  return false;
}

// Moves fd above kHighFd (close-on-exec; the final dup2 clears it).
int move_high(int error_fd, int fd) {
  if (fd < 0) return -1;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, kHighFd);
  if (high < 0) fail(error_fd, kDup2, errno);
  return high;
}

// The child: only syscalls on memory prepared before the fork.
[[noreturn]] void run_child(Prepared& p, const CommandFds& fds, const char* cwd, int error_fd) {
  // Signals as a fresh process expects them: nothing blocked (the agent
  // blocks SIGCHLD), nothing ignored (the agent ignores SIGPIPE; handlers
  // are reset by execve itself).
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (sigaction(sig, &dfl, nullptr) == 0) continue;
    // glibc refuses its internal signals (32, 33); an ignored one would
    // still reach the program: reset it with the raw call (the kernel's
    // struct: handler, flags, restorer, an 8-byte mask).
    struct {
      void (*handler)(int);
      unsigned long flags;
      void (*restorer)();
      unsigned long mask;
    } raw{SIG_DFL, 0, nullptr, 0};
    (void)::syscall(SYS_rt_sigaction, sig, &raw, nullptr, sizeof raw.mask);
  }
  sigset_t none;
  sigemptyset(&none);
  if (int e = pthread_sigmask(SIG_SETMASK, &none, nullptr); e != 0) fail(error_fd, kSigaction, e);
  if (::setsid() < 0) fail(error_fd, kSetsid, errno);
  error_fd = move_high(error_fd, error_fd);
  int in = move_high(error_fd, fds.in);
  int out = move_high(error_fd, fds.out);
  int err = move_high(error_fd, fds.err);
  int fd3 = move_high(error_fd, fds.fd3);
  if (::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) fail(error_fd, kDup2, errno);
  if (fd3 >= 0 && ::dup2(fd3, 3) < 0) fail(error_fd, kDup2, errno);
  if (fds.ctty && ::ioctl(0, TIOCSCTTY, 0) != 0) fail(error_fd, kCtty, errno);
  const int err_slot = fd3 >= 0 ? 4 : 3;
  if (::dup3(error_fd, err_slot, O_CLOEXEC) < 0) fail(error_fd, kDup2, errno);
  error_fd = err_slot;
  if (syscall(SYS_close_range, static_cast<unsigned>(err_slot + 1), ~0U, 0U) != 0) {
    // A seccomp profile older than close_range: close what the limit allows.
    if (errno != ENOSYS && errno != EPERM) fail(error_fd, kCloseRange, errno);
    for (int fd = err_slot + 1; fd < p.close_upto; ++fd) ::close(fd);
  }
  // Only now, with none of the agent's descriptors left: enter_own_net
  // makes this process dumpable for its uid maps.
  if (p.net.port != 0) {
    int listener = enter_own_net(p.net);
    if (listener < 0) fail(error_fd, kListen, errno);
    if (!send_listener(error_fd, listener)) fail(error_fd, kListen, errno);
    ::close(listener);
  }
  for (const auto& l : p.limits)
    if (!set_limit(l.resource, l.value)) fail(error_fd, kSetrlimit, errno);
  if (cwd[0] != '\0' && ::chdir(cwd) != 0) fail(error_fd, kChdir, errno);
  if (!enter_own_landlock_domain()) fail(error_fd, kLandlock, errno);
  // A terminal: no typing into it from inside (terminal.h).
  if (fds.ctty && !deny_terminal_injection()) fail(error_fd, kSeccomp, errno);
  std::size_t underscore_slot = 0;
  if (p.shell_env) {
    // getcwd(2) itself (glibc's getcwd may allocate); without an answer
    // there is no PWD, as in bash.
    underscore_slot = p.pwd_slot + 2;
    p.envp[p.pwd_slot] = p.pwd.data();
    if (syscall(SYS_getcwd, p.pwd.data() + 4, p.pwd.size() - 4) <= 0 || p.pwd[4] != '/') {
      p.envp[p.pwd_slot] = p.envp[p.pwd_slot + 1];
      underscore_slot = p.pwd_slot + 1;
      p.envp[underscore_slot + 1] = nullptr;
    }
  }
  int exec_err = ENOENT;
  for (std::size_t i = 0; i < p.candidates.size(); ++i) {
    const std::string& candidate = p.candidates[i];
    if (underscore_slot) p.envp[underscore_slot] = p.underscores[i].data();
    ::execve(candidate.c_str(), p.argv.data(), p.envp.data());
    // One candidate: its errno. Several, like execvp: EACCES is remembered
    // while the search goes on; ENOENT and ENOTDIR only mean "not here".
    const bool not_here = errno == ENOENT || errno == ENOTDIR;
    if (p.candidates.size() == 1 || errno == EACCES || !not_here) exec_err = errno;
  }
  fail(error_fd, kExecve, exec_err);
}

// The keeper's end: every process left under it, killed and reaped, all
// but the command (a zombie by now), which the keeper reaps last: until
// then its pid, and so its process group's id, cannot be reused, and the
// agent's kill of that group cannot reach a stranger. As a subreaper the
// keeper inherits each orphan before the orphan's parent can be reaped, so
// once the children it saw are reaped, their descendants are its children:
// it looks again until the command is the only one left.
void end_descendants(pid_t cmd) {
  for (;;) {
    std::vector<pid_t> kids = children_of(::getpid());
    kids.erase(std::remove(kids.begin(), kids.end(), cmd), kids.end());
    if (kids.empty()) return;
    std::set<pid_t> seen;
    (void)kill_trees(kids, seen);
    for (pid_t k : kids) {
      int st = 0;
      while (::waitpid(k, &st, 0) < 0 && errno == EINTR) {
      }
    }
  }
}

// Ends the keeper as the command ended, so the agent's wait status is the
// command's: its exit code, or death by its signal (with the disposition
// reset and the signal unblocked; an exit with 128 + signal if it lives).
[[noreturn]] void end_as(int status) {
  if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
  const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  (void)sigaction(sig, &dfl, nullptr);
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  (void)pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  (void)::kill(::getpid(), sig);
  _exit(128 + sig);
}

// The keeper (see spawn_command). Forked from the single-threaded agent, so
// it may allocate; the command's child runs only syscalls.
[[noreturn]] void run_keeper(Prepared& p, const CommandFds& fds, const char* cwd, int report_fd) {
  (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct rlimit no_core {
    0, 0
  };
  (void)setrlimit(RLIMIT_CORE, &no_core);
  pid_t cmd = ::fork();
  if (cmd == 0) run_child(p, fds, cwd, report_fd);
  if (cmd < 0) fail(report_fd, kFork, errno);
  char msg[kCommandPidSize] = {kCommandPidMark};
  const std::int32_t pid32 = cmd;
  std::memcpy(msg + 1, &pid32, sizeof pid32);
  (void)::send(report_fd, msg, sizeof msg, MSG_NOSIGNAL);
  // None of the agent's descriptors: not its stream (fds 0 and 1), not a
  // channel, not the report socket (the agent's EOF comes with execve).
  if (syscall(SYS_close_range, 0U, ~0U, 0U) != 0)
    for (int fd = 0; fd < p.close_upto; ++fd) ::close(fd);
  // Orphans that die meanwhile are reaped as they go (a long command that
  // keeps starting daemons would fill the pids limit with zombies); the
  // command is only seen to end (WNOWAIT) and stays a zombie until
  // end_descendants has killed the rest.
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      _exit(127);  // no command to wait for: cannot be
    }
    if (info.si_pid == cmd) break;
    int st = 0;
    (void)::waitpid(info.si_pid, &st, WNOHANG);
  }
  end_descendants(cmd);
  int status = 0;
  while (::waitpid(cmd, &status, 0) < 0) {
    if (errno != EINTR) _exit(127);
  }
  end_as(status);
}

}  // namespace

SpawnOutcome spawn_command(const AgentExec& e, const CommandFds& fds, bool own_net) {
  SpawnOutcome out;
  Prepared p = prepare(e, own_net);
  // A datagram-like socket, not a pipe: it also carries the listener.
  int report[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, report) != 0) {
    out.err = errno;
    out.step = "socketpair";
    return out;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(report[0]);
    run_keeper(p, fds, e.cwd.c_str(), report[1]);
  }
  int fork_err = errno;
  ::close(report[1]);
  if (pid < 0) {
    ::close(report[0]);
    out.err = fork_err;
    out.step = "fork";
    return out;
  }
  // EOF: execve closed the socket. A report: the child failed and exits.
  // Before either, with own_net: the listener.
  ChildReport r;
  ssize_t n;
  for (;;) {
    char buf[sizeof r];
    struct iovec iov {
      buf, sizeof buf
    };
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    struct msghdr msg {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    n = ::recvmsg(report[0], &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    for (struct cmsghdr* c = n >= 0 ? CMSG_FIRSTHDR(&msg) : nullptr; c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      if (!out.listener && own_net) {
        out.listener.reset(fd);
      } else {
        ::close(fd);
      }
    }
    if (n == 1 && buf[0] == kListenerMark && out.listener) continue;
    if (n == static_cast<ssize_t>(kCommandPidSize) && buf[0] == kCommandPidMark &&
        out.command_pid <= 0) {
      std::int32_t v = 0;
      std::memcpy(&v, buf + 1, sizeof v);
      // The keeper's word, checked anyway: a pid of the container, not the
      // agent (1) nor the keeper itself.
      if (v > 1 && v != pid) out.command_pid = v;
      continue;
    }
    if (n == static_cast<ssize_t>(sizeof r)) std::memcpy(&r, buf, sizeof r);
    break;
  }
  ::close(report[0]);
  if (n == 0 && out.command_pid > 0) {
    out.pid = pid;
    return out;
  }
  if (n == 0) {
    // execve went through but the command's pid never came: end it all.
    ::kill(pid, SIGKILL);
    n = -1;
    errno = EPROTO;
  }
  out.listener.reset();
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  constexpr auto kSteps = sizeof kSpawnSteps / sizeof kSpawnSteps[0];
  if (n == static_cast<ssize_t>(sizeof r) && r.step >= 0 &&
      static_cast<std::size_t>(r.step) < kSteps) {
    out.err = r.err;
    out.step = kSpawnSteps[r.step];
  } else {
    out.err = n < 0 ? errno : EPROTO;
    out.step = "exec report";
  }
  return out;
}

}  // namespace sandcastle::sandbox::engine::agent
