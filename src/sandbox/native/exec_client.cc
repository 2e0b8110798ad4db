// NativeSandbox::exec — the server side of one execution: hand the request
// and four fds to the sandbox's init, then pump stdin/stdout/stderr until the
// supervisor's report arrives. The calling thread does all the waiting, so
// concurrent execs on one sandbox need no shared state beyond one send.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <utility>

#include "sandbox/exec_io.h"
#include "sandbox/native/fd_passing.h"
#include "sandbox/native/init_loop.h"
#include "sandbox/native/native_sandbox.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
namespace {

using Clock = std::chrono::steady_clock;

// Supervisor enforces the timeout; this is only the server's backstop in
// case the sandbox itself stops answering.
constexpr auto kReportGrace = std::chrono::seconds(10);

}  // namespace

Result<ExecWire> exec_wire_for(const ExecRequest& req, const SandboxSpec& spec, bool have_cgroup) {
  auto cmd = exec_command(req, spec);
  if (!cmd) return cmd.take_error();
  ExecWire w;
  w.argv = std::move(cmd->argv);
  w.env = std::move(cmd->env);
  w.cwd = std::move(cmd->cwd);
  w.timeout_ms = cmd->timeout_ms;
  const Limits& l = spec.limits();
  w.rlimit_nofile = l.open_files;
  w.rlimit_fsize = l.file_size_bytes;
  w.rlimit_nproc = l.pids;
  // With a memory cgroup the OOM killer is the fence; without one, each
  // process's data segment is.
  w.rlimit_data = have_cgroup ? 0 : l.memory_bytes;
  w.listen_port = req.private_listener_port;
  w.shell_env = req.shell_env;
  w.last = req.last;
  return w;
}

namespace {

// The listener a private-network exec's supervisor sent crossed from the
// sandbox: it must be what was asked for, a listening TCP socket on
// 127.0.0.1:port.
bool is_loopback_listener(int fd, std::uint16_t port) {
  int domain = 0, protocol = 0, accepting = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_INET)
    return false;
  len = sizeof protocol;
  if (::getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 || protocol != IPPROTO_TCP)
    return false;
  len = sizeof accepting;
  if (::getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) != 0 || !accepting)
    return false;
  struct sockaddr_in a {};
  len = sizeof a;
  return ::getsockname(fd, reinterpret_cast<struct sockaddr*>(&a), &len) == 0 &&
         a.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(a.sin_port) == port;
}

}  // namespace

Result<ExecResult> NativeSandbox::run_exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                                           const CancelToken* cancel) {
  if (req.private_listener_port != 0 && !callbacks.on_listener)
    return Error::make(ErrorCode::kInvalidArgument,
                       "exec: a private listener needs an on_listener callback");
  auto wire = exec_wire_for(req, spec_, cgroup_ != nullptr);
  if (!wire) return wire.take_error();
  std::string bytes = encode_control(ControlKind::kExec, encode(*wire));
  if (bytes.size() > kMaxExecRequestBytes)
    return Error::make(ErrorCode::kInvalidArgument, "exec: argv and env too large");

  int sp[2], in[2], out[2], err[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for exec report");
  UniqueFd report(sp[0]), report_remote(sp[1]);
  if (::pipe2(in, O_CLOEXEC) != 0) return Error::from_errno("pipe for stdin");
  UniqueFd in_r(in[0]), in_w(in[1]);
  if (::pipe2(out, O_CLOEXEC) != 0) return Error::from_errno("pipe for stdout");
  UniqueFd out_r(out[0]), out_w(out[1]);
  if (::pipe2(err, O_CLOEXEC) != 0) return Error::from_errno("pipe for stderr");
  UniqueFd err_r(err[0]), err_w(err[1]);
  for (int fd : {in_w.get(), out_r.get(), err_r.get()}) ::fcntl(fd, F_SETFL, O_NONBLOCK);

  std::uint64_t ooms_before = cgroup_ ? cgroup_->oom_kills() : 0;
  auto start = Clock::now();
  {
    std::shared_lock lock(mu_);
    if (auto st = check_alive(); !st) return st.take_error();
    const int fds[kExecRequestMaxFds] = {report_remote.get(), in_r.get(), out_w.get(), err_w.get(),
                                         req.pass_fd};
    if (int e = send_with_fds(init_.control.get(), bytes, fds,
                              req.pass_fd >= 0 ? kExecRequestMaxFds : kExecRequestFds);
        e != 0)
      // A dead init gives EPIPE or, if unread bytes were queued to it,
      // ECONNRESET: both mean the sandbox is gone, so callers see one.
      return Error::from_errno("send exec request to sandbox init", e == ECONNRESET ? EPIPE : e);
  }
  // Our copy of the report's end must go, or a sandbox that dies never
  // shows as EOF. The output pipes' write ends stay open on purpose: their
  // EOF is never waited for (the report comes once every process of the exec
  // is dead, so what they wrote is in the pipes by then), and without it
  // the last writer's exit does not wake this thread once more before the
  // report does.
  report_remote.reset();
  in_r.reset();

  std::size_t cap = req.output.max_bytes;
  OutputStream sout{std::move(out_r), OutputBuffer(cap), &callbacks.on_stdout};
  OutputStream serr{std::move(err_r), OutputBuffer(cap), &callbacks.on_stderr};
  std::string_view pending_in = req.stdin_data;
  if (pending_in.empty()) in_w.reset();

  // While the exec runs, the token reaches its supervisor directly: one
  // byte on the report socket, 'c' to cancel, 'i' for SIGINT to the main
  // process. Nothing here polls the token.
  struct TokenChannel {
    const CancelToken* token;
    ~TokenChannel() {
      if (token) token->set_channel(nullptr);
    }
  } channel{cancel};
  if (cancel) {
    cancel->set_channel([fd = report.get()](CancelToken::Signal sig) {
      const char c = static_cast<char>(sig);
      return ::send(fd, &c, 1, MSG_NOSIGNAL) == 1;
    });
    if (cancel->cancelled()) (void)!::send(report.get(), "c", 1, MSG_NOSIGNAL);
  }

  auto deadline = start + std::chrono::milliseconds(wire->timeout_ms) + kReportGrace;
  bool want_listener = wire->listen_port != 0;
  std::optional<ExecReport> rep;
  while (!rep) {
    auto now = Clock::now();
    if (now >= deadline)
      return Error::make(ErrorCode::kTimeout,
                         "exec: sandbox did not report within timeout + grace");
    // Clamped before narrowing: a long exec (a kernel lives for days) must not
    // overflow poll's int timeout into a negative "wait forever".
    auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    int wait_ms = static_cast<int>(std::min<long long>(left_ms, 60'000));

    struct pollfd p[4];
    int n = 0;
    int ir = -1, io = -1, ie = -1, ii = -1;
    p[n] = {report.get(), POLLIN, 0};
    ir = n++;
    if (sout.fd) {
      p[n] = {sout.fd.get(), POLLIN, 0};
      io = n++;
    }
    if (serr.fd) {
      p[n] = {serr.fd.get(), POLLIN, 0};
      ie = n++;
    }
    if (in_w) {
      p[n] = {in_w.get(), POLLOUT, 0};
      ii = n++;
    }
    if (::poll(p, static_cast<nfds_t>(n), wait_ms) < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("poll exec fds");
    }
    if (io >= 0 && p[io].revents) pump(sout);
    if (ie >= 0 && p[ie].revents) pump(serr);
    if (ii >= 0 && p[ii].revents) {
      if (p[ii].revents & (POLLERR | POLLHUP)) {
        in_w.reset();
      } else {
        ssize_t w = ::write(in_w.get(), pending_in.data(), pending_in.size());
        if (w > 0) pending_in.remove_prefix(static_cast<std::size_t>(w));
        if ((w < 0 && errno != EAGAIN && errno != EINTR) || pending_in.empty()) in_w.reset();
      }
    }
    if (p[ir].revents) {
      char buf[8192];
      ReceivedMessage m = recv_with_fds(report.get(), buf, sizeof buf);
      UniqueFd passed(m.nfds == 1 ? std::exchange(m.fds[0], -1) : -1);
      m.close_fds();
      if (m.len < 0 && (m.err == EINTR || m.err == EAGAIN)) continue;
      // A supervisor that exits with our late message ('i') unread makes
      // this recv fail once with ECONNRESET; its report is still queued.
      if (m.len < 0 && m.err == ECONNRESET) continue;
      if (m.len <= 0)
        return Error::make(ErrorCode::kUnavailable, "exec: sandbox " + id_ + " went away");
      auto msg = decode_report(std::string_view(buf, static_cast<std::size_t>(m.len)));
      if (!msg || m.truncated)
        return Error::make(ErrorCode::kInternal, "exec: malformed report from sandbox");
      if (msg->kind == ReportKind::kListener) {
        // Once, first, and only when asked for.
        if (!want_listener || !passed || !is_loopback_listener(passed.get(), wire->listen_port))
          return Error::make(ErrorCode::kInternal,
                             "exec: unexpected or malformed listener from sandbox");
        want_listener = false;
        callbacks.on_listener(std::move(passed));
        continue;
      }
      if (passed || (msg->kind == ReportKind::kDone && want_listener))
        return Error::make(ErrorCode::kInternal, "exec: malformed report from sandbox");
      rep = msg;
    }
  }
  // Every process of the exec is dead by now: what they wrote is in the
  // pipes, and a read that would block means it has all been read.
  if (sout.fd) pump(sout);
  if (serr.fd) pump(serr);
  out_w.reset();
  err_w.reset();

  if (rep->kind == ReportKind::kSetupError) return Error::from_errno(rep->step, rep->err);

  ExecResult res;
  fill_result(res, sout, serr, rep->wait_status, start);
  res.cpu_time = std::chrono::microseconds(rep->cpu_us);
  res.peak_memory_bytes = rep->maxrss_kib * 1024;
  switch (rep->end) {
    case SupervisorEnd::kTimeout: res.reason = EndReason::kTimeout; break;
    case SupervisorEnd::kCancelled: res.reason = EndReason::kCancelled; break;
    case SupervisorEnd::kExited:
      if (res.signal == SIGKILL && cgroup_ && cgroup_->oom_kills() > ooms_before)
        res.reason = EndReason::kOutOfMemory;
      else
        res.reason = res.signal ? EndReason::kKilled : EndReason::kExited;
      break;
  }
  return res;
}

}  // namespace sandcastle::sandbox::native
