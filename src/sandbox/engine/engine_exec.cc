// EngineSandbox::exec — one command through the container's agent: its
// stdout and stderr are channels on the agent's stream, its end a control
// message. The calling thread does the waiting, as in the native backend.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "sandbox/engine/engine_sandbox.h"
#include "sandbox/engine/relay_listener.h"
#include "sandbox/exec_io.h"

namespace sandcastle::sandbox::engine {
namespace {

using Clock = std::chrono::steady_clock;

// The agent enforces the timeout; this is the server's backstop if it stops
// answering, and how long output may still trickle in after the end.
constexpr auto kReportGrace = std::chrono::seconds(10);
constexpr auto kDrainGrace = std::chrono::seconds(5);

Result<AgentExec> build_exec(const ExecRequest& req, const SandboxSpec& spec) {
  auto cmd = exec_command(req, spec);
  if (!cmd) return cmd.take_error();
  AgentExec e;
  e.argv = std::move(cmd->argv);
  e.env = std::move(cmd->env);
  e.cwd = std::move(cmd->cwd);
  e.timeout_ms = cmd->timeout_ms;
  e.shell_env = req.shell_env;  // the agent adds PWD, SHLVL and _ as bash would
  e.rlimit_nofile = spec.limits().open_files;
  e.rlimit_fsize = spec.limits().file_size_bytes;
  // Processes and memory: the container's pids and memory cgroup fence them.
  e.listen_port = req.private_listener_port;
  return e;
}

// The agent's failure report is hostile input: an errno out of range or a
// step with control characters is not passed on as such.
Error failure_error(const AgentFailure& f, const std::string& program) {
  std::string step;
  for (char c : f.step) step += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (step == "execve") step += " " + program;
  const int err = f.err > 0 && f.err < 4096 ? f.err : EPROTO;
  return Error::from_errno(step.empty() ? "exec" : step, err);
}

ExecResult result_of(const AgentDone& done, OutputStream& out, OutputStream& err,
                     Clock::time_point start) {
  ExecResult res;
  fill_result(res, out, err, done.wait_status, start);
  res.cpu_time = std::chrono::microseconds(done.cpu_us);
  res.peak_memory_bytes = done.maxrss_kib * 1024;
  switch (done.end) {
    case AgentEnd::kTimeout: res.reason = EndReason::kTimeout; break;
    case AgentEnd::kCancelled: res.reason = EndReason::kCancelled; break;
    case AgentEnd::kExited:
      res.reason = res.signal ? EndReason::kKilled : EndReason::kExited;
      break;
  }
  return res;
}

}  // namespace

Result<ExecResult> EngineSandbox::exec(const ExecRequest& req, const ExecCallbacks& callbacks,
                                       const sandbox::CancelToken* cancel) {
  if (req.private_listener_port != 0 && !callbacks.on_listener)
    return Error::make(ErrorCode::kInvalidArgument,
                       "exec: a private listener needs an on_listener callback");
  auto wire = build_exec(req, spec_);
  if (!wire) return wire.take_error();
  if (auto st = check_alive(); !st) return st.take_error();
  AgentLink& link = *container_.link;
  AgentExec& e = *wire;
  e.id = link.next_id();

  // Whatever way this returns, the channels it opened are the link's to
  // forget (the agent drops a failed exec's without a word).
  struct Channels {
    AgentLink& link;
    std::vector<std::uint32_t> ids;
    ~Channels() {
      for (std::uint32_t id : ids) link.drop(id);
    }
  } opened{link, {}};
  std::size_t cap = req.output.max_bytes;
  OutputStream sout{UniqueFd(), OutputBuffer(cap), &callbacks.on_stdout};
  OutputStream serr{UniqueFd(), OutputBuffer(cap), &callbacks.on_stderr};
  UniqueFd in_w;
  auto out_ch = link.open_channel();
  if (!out_ch) return out_ch.take_error();
  e.ch_stdout = out_ch->first;
  opened.ids.push_back(e.ch_stdout);
  sout.fd = std::move(out_ch->second);
  auto err_ch = link.open_channel();
  if (!err_ch) return err_ch.take_error();
  e.ch_stderr = err_ch->first;
  opened.ids.push_back(e.ch_stderr);
  serr.fd = std::move(err_ch->second);
  std::string_view pending_in = req.stdin_data;
  if (!pending_in.empty()) {
    auto in_ch = link.open_channel();
    if (!in_ch) return in_ch.take_error();
    e.ch_stdin = in_ch->first;
    opened.ids.push_back(e.ch_stdin);
    in_w = std::move(in_ch->second);
  }
  for (int fd : {sout.fd.get(), serr.fd.get(), in_w.get()})
    if (fd >= 0) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  if (req.pass_fd >= 0) {
    UniqueFd dup(::fcntl(req.pass_fd, F_DUPFD_CLOEXEC, 0));
    if (!dup) return Error::from_errno("dup the exec's fd 3");
    e.ch_fd3 = link.next_id();
    if (auto st = link.attach(e.ch_fd3, std::move(dup)); !st) return st.take_error();
    opened.ids.push_back(e.ch_fd3);
  }
  // The listener an installer's exec gets (ExecRequest::private_listener_port).
  std::optional<RelayListener> listener;
  if (e.listen_port != 0) {
    auto l = make_relay_listener(64, "an exec's listener");
    if (!l) return l.take_error();
    listener = std::move(*l);
    link.on_accept(e.id, [to = listener->address] { return connect_relay(to); });
  }

  auto waiter = link.watch(e.id);
  struct Unwatch {
    AgentLink& link;
    std::uint32_t id;
    const sandbox::CancelToken* token;
    ~Unwatch() {
      if (token) token->set_channel(nullptr);
      link.unwatch(id);
    }
  } unwatch{link, e.id, cancel};
  const auto start = Clock::now();
  if (auto st = link.send_control(encode_exec(e), {e.ch_stdin, e.ch_stdout, e.ch_stderr, e.ch_fd3});
      !st)
    return st.take_error();
  if (listener) {
    UniqueFd handed(::fcntl(listener->fd.get(), F_DUPFD_CLOEXEC, 0));
    if (!handed) return Error::from_errno("dup the exec's listener");
    callbacks.on_listener(std::move(handed));
  }
  if (cancel) {
    cancel->set_channel([&link, id = e.id](sandbox::CancelToken::Signal sig) {
      auto s = sig == sandbox::CancelToken::Signal::kCancel ? AgentSignal::kCancel
                                                            : AgentSignal::kInterrupt;
      return link.send_control(encode_signal(id, s)).ok();
    });
    if (cancel->cancelled()) (void)link.send_control(encode_signal(e.id, AgentSignal::kCancel));
  }

  auto deadline = start + std::chrono::milliseconds(e.timeout_ms) + kReportGrace;
  std::optional<AgentDone> done;
  for (;;) {
    if (done && !sout.fd && !serr.fd) break;
    auto now = Clock::now();
    if (now >= deadline) {
      if (done) break;  // output that never ended: what came is the result
      (void)link.send_control(encode_signal(e.id, AgentSignal::kCancel));
      return Error::make(ErrorCode::kTimeout,
                         "exec: the container's agent did not report within timeout + grace");
    }
    auto left_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    struct pollfd p[4];
    int n = 0, io = -1, ie = -1, ii = -1;
    p[n++] = {waiter->fd(), POLLIN, 0};
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
    if (::poll(p, static_cast<nfds_t>(n), static_cast<int>(std::min<long long>(left_ms, 60'000))) <
        0) {
      if (errno == EINTR) continue;
      return Error::from_errno("poll exec channels");
    }
    if (io >= 0 && p[io].revents) pump(sout);
    if (ie >= 0 && p[ie].revents) pump(serr);
    if (ii >= 0 && p[ii].revents) {
      ssize_t w = (p[ii].revents & (POLLERR | POLLHUP))
                      ? -1
                      : ::send(in_w.get(), pending_in.data(), pending_in.size(), MSG_NOSIGNAL);
      if (w > 0) pending_in.remove_prefix(static_cast<std::size_t>(w));
      if ((w < 0 && errno != EAGAIN && errno != EINTR) || pending_in.empty()) {
        (void)::shutdown(in_w.get(), SHUT_WR);
        in_w.reset();
      }
    }
    if (!p[0].revents) continue;
    while (auto m = waiter->pop()) {
      // "execve <program>", as the native backend says it: callers tell a
      // program that could not run from other failures by it.
      if (m->kind == AgentMsg::kExecFailed) return failure_error(*m->failure, e.argv[0]);
      if (m->kind == AgentMsg::kDone && !done) {
        done = *m->done;
        in_w.reset();
        deadline = std::min(deadline, Clock::now() + kDrainGrace);
      }
    }
    if (waiter->dead() && !done)
      return Error::make(ErrorCode::kUnavailable,
                         "exec: sandbox " + id_ + " went away (" + link.end_reason() + ")");
  }
  return result_of(*done, sout, serr, start);
}

}  // namespace sandcastle::sandbox::engine
