#include "sandbox/native/supervisor.h"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/native/caps.h"
#include "sandbox/native/exec_proc.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/init_loop.h"
#include "sandbox/native/net.h"
#include "sandbox/native/rlimits.h"
#include "sandbox/native/terminal_pty.h"

namespace sandcastle::sandbox::native {
namespace {

std::int64_t now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

[[noreturn]] void fail_child(int error_fd, const StepError& e) {
  WireWriter w;
  w.i32(e.err);
  w.str(e.step);
  (void)!::write(error_fd, w.bytes().data(), w.bytes().size());
  _exit(127);
}

std::string find_env(const std::vector<std::string>& env, const char* key) {
  std::size_t klen = std::strlen(key);
  for (const auto& kv : env)
    if (kv.size() > klen && kv.compare(0, klen, key) == 0 && kv[klen] == '=') return kv.substr(klen + 1);
  return {};
}

// execvpe() searches the PATH of the *current* environment; the command's
// PATH is the one in its request, so the search is done here. Exec attempts
// are spelled out before the (v)fork, so the child only makes syscalls.
struct PreparedExec {
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::vector<std::string> candidates;  // paths to try, in order
  std::string step;                      // "execve <argv[0]>"
  std::string pwd, shlvl, underscore;    // shell_env's variables (envp points at them)
  std::size_t underscore_slot = 0;       // envp index of "_=", 0 = none
};

// What bash adds to the environment of a program it runs: PWD (the working
// directory, as getcwd has it), SHLVL=0 and _ (set per candidate path).
void add_shell_env(PreparedExec& p) {
  char cwd[PATH_MAX];
  if (::getcwd(cwd, sizeof cwd) != nullptr) {
    p.pwd = std::string("PWD=") + cwd;
    p.envp.push_back(p.pwd.data());
  }
  p.shlvl = "SHLVL=0";  // bash -c lowers it again when it execs the program in its place
  p.envp.push_back(p.shlvl.data());
  p.underscore_slot = p.envp.size();
  p.envp.push_back(nullptr);  // filled per candidate
}

PreparedExec prepare_exec(const ExecWire& req) {
  PreparedExec p;
  for (const auto& a : req.argv) p.argv.push_back(const_cast<char*>(a.c_str()));
  p.argv.push_back(nullptr);
  for (const auto& e : req.env) p.envp.push_back(const_cast<char*>(e.c_str()));
  if (req.shell_env) add_shell_env(p);
  p.envp.push_back(nullptr);
  const std::string& file = req.argv[0];
  p.step = "execve " + file;
  if (file.find('/') != std::string::npos) {
    p.candidates.push_back(file);
    return p;
  }
  std::string path = find_env(req.env, "PATH");
  if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    p.candidates.push_back((dir.empty() ? "." : dir) + "/" + file);
    start = end + 1;
  }
  return p;
}

StepError exec_command(PreparedExec& p) {
  int err = ENOENT;
  for (const auto& candidate : p.candidates) {
    if (p.underscore_slot) {
      p.underscore = "_=" + candidate;
      p.envp[p.underscore_slot] = p.underscore.data();
    }
    ::execve(candidate.c_str(), p.argv.data(), p.envp.data());
    if (p.candidates.size() == 1) return StepError{errno, p.step};
    if (errno == EACCES) err = EACCES;  // like execvp: remember, keep looking
    else if (errno != ENOENT && errno != ENOTDIR) err = errno;
  }
  return StepError{err, p.step};
}

// A Landlock domain of the command's own. Every command of a sandbox runs
// as one uid, which alone would let one exec reach into another's processes
// through /proc/<pid>/mem, environ or fd (and pidfd_getfd): a process in a
// Landlock domain gets ptrace-class access only to its own domain and those
// nested in it, so the installer, which alone has a way out, cannot be taken
// over by another program of the sandbox. The ruleset handles only block
// device creation, which no command can do anyway: it is there for the
// domain, not to restrict files. A kernel without Landlock leaves the step out.
std::optional<StepError> enter_own_landlock_domain() {
  struct landlock_ruleset_attr attr {};
  attr.handled_access_fs = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
  long ruleset = syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0U);
  if (ruleset < 0) {
    if (errno == ENOSYS || errno == EOPNOTSUPP) return std::nullopt;
    return step_failed("landlock_create_ruleset");
  }
  long r = syscall(SYS_landlock_restrict_self, ruleset, 0U);
  int err = errno;
  ::close(static_cast<int>(ruleset));
  if (r != 0) return step_failed("landlock_restrict_self", err);
  return std::nullopt;
}

void send_setup_error(int report_fd, int err, const std::string& step) {
  ExecReport rep;
  rep.kind = ReportKind::kSetupError;
  rep.err = err;
  rep.step = step;
  std::string bytes = encode(rep);
  (void)!::send(report_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

// The command's process, forked by its supervisor before any request
// exists. Setup order (fixed; each step reports {step, errno} on error_fd):
// everything that does not depend on the request first, seccomp included,
// then it waits; the request's part (stdio, rlimits, cwd) is only syscalls
// the filter allows, and execve.
void prepare_exec_child(const InitConfig& config, int error_fd) {
  // 1. an empty signal mask, as a fresh process expects (dispositions are
  //    all default since init's start; init blocks SIGCHLD for its signalfd)
  sigset_t all;
  sigemptyset(&all);
  pthread_sigmask(SIG_SETMASK, &all, nullptr);
  // 2. (its process group or session comes with the request, step 7b:
  //    a terminal's command must lead a session, and a group leader cannot)
  // 3. the OOM killer picks commands, never the sandbox's init or
  //    supervisors. /proc/self is root-owned while we are non-dumpable (as
  //    init is): dumpable just for the write, then not again until execve
  //    (which makes the command dumpable), so nothing can reach into a
  //    waiting child through /proc.
  prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
  int oom = ::open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (oom < 0 || ::write(oom, "1000", 4) != 4) fail_child(error_fd, step_failed("set oom_score_adj"));
  ::close(oom);
  prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // 4. no capabilities at all; then no way to gain any (setuid files, file caps)
  if (auto e = drop_all_caps()) fail_child(error_fd, *e);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) fail_child(error_fd, step_failed("no_new_privs"));
  // 4b. a Landlock domain of its own: no other exec reaches into this one
  if (auto e = enter_own_landlock_domain()) fail_child(error_fd, *e);
  // 5. seccomp: what follows is our own code, using only allowed syscalls.
  //    Usually the supervisor's, inherited (run_supervisor): then the
  //    config holds none and the steps above ran under it already.
  if (!config.seccomp_bpf.empty())
    if (int e = load_seccomp_filter(config.seccomp_bpf); e != 0)
      fail_child(error_fd, step_failed("seccomp load", e));
}

[[noreturn]] void run_exec_child(const InitConfig& config, int request_fd, int error_fd) {
  prepare_exec_child(config, error_fd);
  // 6. the request: ExecWire + stdin, stdout, stderr. The buffer is left
  // uninitialized: a zeroed one is 200 KiB of dirty memory in every waiting
  // slot of every sandbox; untouched, it costs only what a request fills.
  auto buf = std::make_unique_for_overwrite<char[]>(kMaxExecRequestBytes + 1);
  ReceivedMessage m = recv_with_fds(request_fd, buf.get(), kMaxExecRequestBytes + 1);
  if (m.len <= 0) _exit(0);  // the supervisor is gone: no exec after all
  auto req = decode_exec(std::string_view(buf.get(), static_cast<std::size_t>(m.len)));
  if (!req || m.nfds < 3 || m.nfds > 4 || m.truncated)
    fail_child(error_fd, step_failed("receive exec request", EPROTO));
  // 7. stdio from the server's pipes, the passed fd (if any) as 3, the
  //    error pipe (close-on-exec) after them; every other fd closed. The
  //    error pipe and the passed fd first move above every target number,
  //    so no dup2 below overwrites a source still to be used.
  //    A terminal's stdio is its pty's slave instead (terminal_pty.h).
  const bool passed = m.nfds == 4;
  int high_err = ::fcntl(error_fd, F_DUPFD_CLOEXEC, 16);
  if (high_err < 0) fail_child(error_fd, step_failed("move error pipe"));
  error_fd = high_err;
  int high_pass = passed ? ::fcntl(m.fds[3], F_DUPFD_CLOEXEC, 16) : -1;
  if (passed && high_pass < 0) fail_child(error_fd, step_failed("move passed fd"));
  int stdio[3] = {m.fds[0], m.fds[1], m.fds[2]};
  // 7b. a process group of its own, so that kill(0) or a shell's job
  //     control never reaches the supervisor; in init's session, which has
  //     no terminal. A terminal's command leads a session, to take its pty.
  if (req->pty_rows != 0 ? ::setsid() < 0 : ::setpgid(0, 0) != 0)
    fail_child(error_fd, step_failed(req->pty_rows != 0 ? "setsid" : "setpgid"));
  if (req->pty_rows != 0) {
    int slave = -1;
    if (auto e = open_terminal_pty(*req, request_fd, &slave)) fail_child(error_fd, *e);
    int high_slave = ::fcntl(slave, F_DUPFD_CLOEXEC, 16);
    if (high_slave < 0) fail_child(error_fd, step_failed("move pty slave"));
    stdio[0] = stdio[1] = stdio[2] = high_slave;
  }
  if (::dup2(stdio[0], 0) < 0 || ::dup2(stdio[1], 1) < 0 || ::dup2(stdio[2], 2) < 0)
    fail_child(error_fd, step_failed("dup2 stdio"));
  if (passed && ::dup2(high_pass, 3) < 0) fail_child(error_fd, step_failed("dup2 passed fd"));
  const int err_slot = passed ? 4 : 3;
  if (::dup3(error_fd, err_slot, O_CLOEXEC) < 0) fail_child(error_fd, step_failed("dup3 error pipe"));
  error_fd = err_slot;
  if (syscall(SYS_close_range, static_cast<unsigned>(err_slot + 1), ~0U, 0U) != 0)
    fail_child(error_fd, step_failed("close_range"));
  // 8. rlimits (files, file size, processes, data, no core dumps): lowered only
  if (auto e = apply_exec_rlimits(*req)) fail_child(error_fd, *e);
  // 9. working directory
  if (::chdir(req->cwd.c_str()) != 0) fail_child(error_fd, step_failed("chdir " + req->cwd));
  // 10. execve
  PreparedExec prepared = prepare_exec(*req);
  fail_child(error_fd, exec_command(prepared));
}

// The command of an AheadWire, started now: the same setup (steps 1-5),
// then the request's part from the AheadWire, stdio a pipe of its own and
// request_fd as its fd 3 (AheadCommand in sandbox.h), and execve.
[[noreturn]] void run_ahead_child(const InitConfig& config, const AheadWire& ahead, int request_fd,
                                  int error_fd) {
  prepare_exec_child(config, error_fd);
  if (::setpgid(0, 0) != 0) fail_child(error_fd, step_failed("setpgid"));
  int high_err = ::fcntl(error_fd, F_DUPFD_CLOEXEC, 16);
  if (high_err < 0) fail_child(error_fd, step_failed("move error pipe"));
  error_fd = high_err;
  int high_req = ::fcntl(request_fd, F_DUPFD_CLOEXEC, 16);
  if (high_req < 0) fail_child(error_fd, step_failed("move request socket"));
  // Not close-on-exec, so no dup2 below can be a no-op that leaves the flag.
  int own[2];
  if (::pipe2(own, 0) != 0) fail_child(error_fd, step_failed("pipe for stdio"));
  if (::dup2(own[0], 0) < 0 || ::dup2(own[1], 1) < 0 || ::dup2(own[1], 2) < 0)
    fail_child(error_fd, step_failed("dup2 stdio"));
  if (::dup2(high_req, 3) < 0) fail_child(error_fd, step_failed("dup2 request socket"));
  if (::dup3(error_fd, 4, O_CLOEXEC) < 0) fail_child(error_fd, step_failed("dup3 error pipe"));
  error_fd = 4;
  if (syscall(SYS_close_range, 5U, ~0U, 0U) != 0) fail_child(error_fd, step_failed("close_range"));
  if (auto e = apply_exec_rlimits(ahead.command)) fail_child(error_fd, *e);
  if (::chdir(ahead.command.cwd.c_str()) != 0)
    fail_child(error_fd, step_failed("chdir " + ahead.command.cwd));
  PreparedExec prepared = prepare_exec(ahead.command);
  fail_child(error_fd, exec_command(prepared));
}

// The command's process and the supervisor's ends of its two channels.
struct ExecChild {
  pid_t pid = -1;
  int errors = -1;   // its {step, errno} pipe, read end
  int request = -1;  // its request socket, our end
  int setup_errno = 0;
  const char* setup_step = nullptr;  // set: it could not be made
  bool ahead = false;                // running the AheadWire's command
};

ExecChild fork_exec_child(const InitConfig& config, int signal_fd, int slot_fd,
                          const AheadWire* ahead) {
  ExecChild c;
  int errpipe[2], childsock[2];
  if (::pipe2(errpipe, O_CLOEXEC) != 0) {
    c.setup_errno = errno;
    c.setup_step = "pipe for exec errors";
    return c;
  }
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, childsock) != 0) {
    c.setup_errno = errno;
    c.setup_step = "socketpair for exec child";
    ::close(errpipe[0]);
    ::close(errpipe[1]);
    return c;
  }
  c.pid = ::fork();
  if (c.pid == 0) {
    ::close(errpipe[0]);
    ::close(childsock[0]);
    ::close(signal_fd);
    ::close(slot_fd);
    if (ahead) run_ahead_child(config, *ahead, childsock[1], errpipe[1]);
    run_exec_child(config, childsock[1], errpipe[1]);
  }
  if (c.pid < 0) {
    c.setup_errno = errno;
    c.setup_step = "fork exec child";
  }
  ::close(errpipe[1]);
  ::close(childsock[1]);
  c.errors = errpipe[0];
  c.request = childsock[0];
  c.ahead = ahead != nullptr && c.pid > 0;
  return c;
}

// The started command takes the exec: its last word and stdio. False if it
// cannot (it died waiting, the OOM killer say, or the exec is not its own):
// the caller then makes a plain child for it.
bool hand_to_ahead(ExecChild& child, const AheadWire& ahead, const ExecWire& req,
                   const ExecFds& fds) {
  if (!ahead_matches(ahead, req) || fds.pass >= 0) return false;
  int st = 0;
  if (::waitpid(child.pid, &st, WNOHANG) == child.pid) {
    child.pid = -1;  // reaped: nothing left to kill
    return false;
  }
  const int stdio[3] = {fds.in, fds.out, fds.err};
  return send_with_fds(child.request, req.argv.back(), stdio, 3) == 0;
}

void discard_child(ExecChild& child) {
  if (child.pid > 0) {
    ::kill(child.pid, SIGKILL);
    while (::waitpid(child.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(child.errors);
  ::close(child.request);
  child = {};
}

// An exec with a listen_port: init cloned this supervisor into a network
// namespace of its own (the command, forked since, is in it too). `lo` up,
// the listener opened and sent to the server before the command has its
// request, so its first connect finds it listening; our copy is closed, so
// the server's is the only one.
std::optional<StepError> hand_over_listener(int report_fd, bool own_netns, std::uint16_t port) {
  if (!own_netns || port == 0) return step_failed("listener without a network namespace of its own", EPROTO);
  if (auto e = bring_loopback_up()) return e;
  int listener = -1;
  if (auto e = open_loopback_listener(port, &listener)) return e;
  ExecReport rep;
  rep.kind = ReportKind::kListener;
  int err = send_with_fds(report_fd, encode(rep), &listener, 1);
  ::close(listener);
  if (err != 0) return step_failed("send listener", err);
  return std::nullopt;
}

// What the processes of one exec used, summed over every one reaped (each
// wait4 also counts that process's own reaped children): RUSAGE_CHILDREN
// would add up every exec this supervisor ever ran.
struct Usage {
  std::uint64_t cpu_us = 0;
  std::uint64_t maxrss_kib = 0;
  void add(const struct rusage& ru) {
    cpu_us += static_cast<std::uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000 +
              static_cast<std::uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    maxrss_kib = std::max(maxrss_kib, static_cast<std::uint64_t>(ru.ru_maxrss));
  }
};

// Ends every process of the exec and reaps them all; returns the main
// process's status if it had not been reaped yet. kill(-1) from a PID
// namespace's init reaches every process in it; one forked while it ran is
// orphaned to us and killed on the next turn, so none outlives the exec.
void end_all(pid_t child, bool& main_done, int& main_status, Usage& usage) {
  ::kill(-1, SIGKILL);
  for (;;) {
    int st = 0;
    struct rusage ru {};
    pid_t p = ::wait4(-1, &st, WNOHANG, &ru);
    if (p == 0) {
      ::kill(-1, SIGKILL);
      p = ::wait4(-1, &st, 0, &ru);
    }
    if (p < 0) {
      if (errno == EINTR) continue;
      return;  // ECHILD: nothing is left
    }
    usage.add(ru);
    if (p == child && !main_done) {
      main_status = st;
      main_done = true;
    }
  }
}

// One exec, from the waiting command process to the report. Returns whether
// this supervisor takes another (a plain exec that ended: no terminal,
// listener or started command, and not the sandbox's last); on a setup
// failure it reports and exits.
bool serve_one(int slot_fd, const InitConfig& config, int signal_fd, bool own_netns,
               const AheadWire* ahead) {
  ExecChild exec_child = fork_exec_child(config, signal_fd, slot_fd, ahead);
  // Wait for our exec: its request and four fds (report, stdin, stdout,
  // stderr), or five (and the command's fd 3).
  // Uninitialized, as in the exec child: only what the request fills is touched.
  auto buf = std::make_unique_for_overwrite<char[]>(kMaxExecRequestBytes + 1);
  ReceivedMessage m = recv_with_fds(slot_fd, buf.get(), kMaxExecRequestBytes + 1);
  if (m.len <= 0 || m.nfds < kExecRequestFds || m.nfds > kExecRequestMaxFds || m.truncated) {
    // Init discarded this slot (or is gone): nothing to supervise.
    ::kill(-1, SIGKILL);
    _exit(0);
  }
  ExecFds fds{m.fds[0], m.fds[1], m.fds[2], m.fds[3], m.nfds > kExecRequestFds ? m.fds[4] : -1};
  auto req = decode_exec(std::string_view(buf.get(), static_cast<std::size_t>(m.len)));
  if (!req) {
    send_setup_error(fds.report, EPROTO, "decode exec request");
    ::kill(-1, SIGKILL);
    _exit(1);
  }
  // Init sends a started command only its own exec (start_exec); a plain
  // child is made for anything else all the same.
  bool handed = exec_child.ahead && hand_to_ahead(exec_child, *ahead, *req, fds);
  if (exec_child.ahead && !handed) {
    discard_child(exec_child);
    exec_child = fork_exec_child(config, signal_fd, slot_fd, nullptr);
  }
  if (exec_child.setup_step) {
    send_setup_error(fds.report, exec_child.setup_errno, exec_child.setup_step);
    ::kill(-1, SIGKILL);
    _exit(1);
  }
  const pid_t child = exec_child.pid;
  if (own_netns || req->listen_port != 0) {
    if (auto e = hand_over_listener(fds.report, own_netns, req->listen_port)) {
      send_setup_error(fds.report, e->err == 0 ? EIO : e->err, e->step);
      ::kill(-1, SIGKILL);
      _exit(1);
    }
  }
  std::int64_t deadline = now_ms() + static_cast<std::int64_t>(req->timeout_ms);
  // Hand the command its request; a child that already failed its setup
  // makes this EPIPE, and its {step, errno} is in the error pipe.
  const int stdio[4] = {fds.in, fds.out, fds.err, fds.pass};
  if (!handed)
    (void)send_with_fds(exec_child.request,
                        std::string_view(buf.get(), static_cast<std::size_t>(m.len)), stdio,
                        fds.pass >= 0 ? 4 : 3);
  buf.reset();  // a kernel's supervisor waits for days: give the pages back
  if (req->pty_rows != 0) {
    if (auto e = forward_terminal_master(exec_child.request, exec_child.errors, fds.report)) {
      send_setup_error(fds.report, e->err, e->step);
      ::kill(-1, SIGKILL);
      _exit(1);
    }
  }
  ::close(exec_child.request);
  ::close(fds.in);
  ::close(fds.out);
  ::close(fds.err);
  if (fds.pass >= 0) ::close(fds.pass);

  ExecReport rep;
  int main_status = 0;
  bool main_done = false;
  Usage usage;
  SupervisorEnd end = SupervisorEnd::kExited;
  while (!main_done) {
    std::int64_t left = deadline - now_ms();
    if (left <= 0) {
      end = SupervisorEnd::kTimeout;
      break;
    }
    struct pollfd pfds[2] = {{fds.report, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    int r = ::poll(pfds, 2, left > 60'000 ? 60'000 : static_cast<int>(left));
    if (r < 0 && errno != EINTR) break;
    // 'i' from the server: SIGINT to the command, which goes on. Any other
    // message, or EOF, means: stop now.
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char msg[16];
      ssize_t got = ::recv(fds.report, msg, sizeof msg, MSG_DONTWAIT);
      if (got == 1 && msg[0] == 'i') {
        ::kill(child, SIGINT);
        continue;
      }
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      end = SupervisorEnd::kCancelled;
      break;
    }
    if (pfds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(signal_fd, &si, sizeof si) > 0) {
      }
      int st = 0;
      pid_t p;
      struct rusage ru {};
      // Orphans of the command are re-parented to us: reap them as we go.
      while ((p = ::wait4(-1, &st, WNOHANG, &ru)) > 0) {
        usage.add(ru);
        if (p == child) {
          main_status = st;
          main_done = true;
        }
      }
    }
  }
  // Whatever ended the exec, nothing it started may outlive it.
  end_all(child, main_done, main_status, usage);

  char ebuf[4096];
  ssize_t n = ::read(exec_child.errors, ebuf, sizeof ebuf);
  if (n > 0) {
    WireReader r(std::string_view(ebuf, static_cast<std::size_t>(n)));
    rep.kind = ReportKind::kSetupError;
    rep.err = r.i32();
    rep.step = r.str();
    if (!r.ok()) rep.step = "exec setup (garbled report)";
  } else {
    rep.kind = ReportKind::kDone;
    rep.wait_status = main_status;
    rep.end = end;
    rep.cpu_us = usage.cpu_us;
    rep.maxrss_kib = usage.maxrss_kib;
  }
  ::close(exec_child.errors);
  // Consume the server's cancel message: a unix socket closed with unread
  // data makes the peer's next recv fail with ECONNRESET, losing our report.
  char drain[16];
  while (::recv(fds.report, drain, sizeof drain, MSG_DONTWAIT) > 0) {
  }
  // Init hears first that this supervisor takes another exec, so that it
  // has it back before the server, told by the report, can send the next.
  bool again = rep.kind == ReportKind::kDone && !ahead && !own_netns && req->listen_port == 0 &&
               req->pty_rows == 0 && !req->last;
  if (again && ::send(slot_fd, &kSlotReady, 1, MSG_NOSIGNAL) != 1) again = false;
  std::string bytes = encode(rep);
  (void)!::send(fds.report, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  ::close(fds.report);
  return again;
}

// The sandbox's seccomp filter on the supervisor itself, once, so that the
// command processes it forks inherit it instead of each loading (and the
// kernel JIT-compiling, with a cross-CPU text patch) a copy of its own: that
// was more of the machine's time per exec than the rest of the supervisor's
// work. What the supervisor does from here on (fork, wait4, kill, poll,
// send and recv with fds) the filter allows. Not for a supervisor in a
// network namespace of its own: it still brings `lo` up and opens the
// listener. No new privileges first: the supervisor never execs.
bool load_filter_here(const InitConfig& config, bool own_netns) {
  if (own_netns || config.seccomp_bpf.empty()) return false;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return load_seccomp_filter(config.seccomp_bpf) == 0;
}

}  // namespace

[[noreturn]] void run_supervisor(int slot_fd, const InitConfig& config, int signal_fd,
                                 bool own_netns, const AheadWire* ahead) {
  prctl(PR_SET_NAME, "sc-supervisor", 0, 0, 0);
  (void)mount_exec_proc(config);
  // With the filter in force here, the commands' copy of the config has
  // none left to load (prepare_exec_child's step 5).
  InitConfig for_commands;
  const bool filtered = load_filter_here(config, own_netns);
  if (filtered) {
    for_commands = config;
    for_commands.seccomp_bpf.clear();
  }
  const InitConfig& child_config = filtered ? for_commands : config;
  if (serve_one(slot_fd, child_config, signal_fd, own_netns, ahead))
    while (serve_one(slot_fd, child_config, signal_fd, false, nullptr)) {
    }
  _exit(0);
}

}  // namespace sandcastle::sandbox::native
