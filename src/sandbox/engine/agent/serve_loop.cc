#include "sandbox/engine/agent/serve_loop.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/unique_fd.h"
#include "sandbox/engine/agent/channels.h"
#include "sandbox/engine/agent/command.h"
#include "sandbox/engine/agent/file_session.h"
#include "sandbox/engine/agent/own_net.h"
#include "sandbox/engine/agent/peer_owner.h"
#include "sandbox/engine/agent/proc_tree.h"
#include "sandbox/engine/agent/sandbox_listeners.h"
#include "sandbox/engine/agent/terminal.h"

namespace sandcastle::sandbox::engine::agent {
namespace {

std::int64_t now_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

bool set_nonblock(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0;
}

bool has_nul(const std::string& s) {
  return s.find('\0') != std::string::npos;
}

// One short line on stderr (the engine keeps it as the exec's log).
void log(const std::string& line) {
  (void)std::fprintf(stderr, "sandcastle-agent: %s\n", line.c_str());
}

std::string errno_line(const char* what, int err) {
  const char* text = strerrordesc_np(err);
  return std::string(what) + ": " + (text ? text : "errno " + std::to_string(err));
}

// How long channels may drain after their command ended while the server
// gives no credit: then they are closed and kDone sent (the server stops
// waiting 5 s after kDone anyway; nothing here may wait for ever).
constexpr std::int64_t kDrainWaitMs = 3000;

struct Exec {
  std::uint32_t id = 0;
  pid_t pid = -1;                   // the command's keeper (command.h): the agent's child
  pid_t cmd_pid = -1;               // the command: its session and process group
  std::int64_t deadline = 0;        // 0: none
  std::int64_t drain_deadline = 0;  // set when the main process is reaped
  AgentEnd end = AgentEnd::kExited;
  bool killed = false;
  bool reaped = false;
  AgentDone done;
  std::vector<std::uint32_t> channels;
  UniqueFd listener;
  UniqueFd pty;  // a terminal's master (a copy: the channel has its own), for kResize
};

class Agent {
 public:
  int run();

 private:
  // The stream from the server.
  void read_server();
  void parse_frames();
  void on_control(std::string_view payload);
  [[noreturn]] void protocol_error(const std::string& what);

  void start_exec(AgentExec e);
  bool make_exec_fds(const AgentExec& e, CommandFds& child, std::vector<UniqueFd>& keep,
                     AgentFailure& failure, UniqueFd& pty);
  void start_files(std::uint32_t ch, std::uint64_t rlimit_fsize);
  void check_new_channels(const std::vector<std::uint32_t>& ids, const char* what);
  void on_signal(std::uint32_t id, AgentSignal s);
  void on_resize(std::uint32_t id, std::uint32_t size);
  void on_main_exit(Exec& x);
  void kill_exec_tree(Exec& x);
  void kill_escaped();
  void try_finish(std::uint32_t id);
  void reap();
  void check_deadlines();
  std::int64_t next_deadline() const;
  void accept_on(Exec& x);
  void kill_everything();

  Channels ch_;
  std::string in_;
  std::map<std::uint32_t, Exec> execs_;
  std::unordered_map<pid_t, std::uint32_t> exec_by_pid_;
  std::set<pid_t> file_workers_;
  std::uint32_t next_agent_channel_ = kAgentChannelBase;
  SandboxListeners listeners_{ch_, next_agent_channel_};
  UniqueFd sigfd_;
  bool server_eof_ = false;
};

void Agent::protocol_error(const std::string& what) {
  log("protocol error: " + what);
  // The server drops the stream at a protocol error: nothing started here
  // may outlive it.
  kill_everything();
  _exit(2);
}

void Agent::read_server() {
  // Reads in batches up to a little over one data frame; larger control
  // frames (an exec's environment) arrive over several reads.
  char buf[kMaxDataFrame + kFrameHeader];
  for (int i = 0; i < 4; ++i) {
    ssize_t n = ::read(0, buf, sizeof buf);
    if (n > 0) {
      in_.append(buf, static_cast<std::size_t>(n));
      parse_frames();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    server_eof_ = true;  // EOF or an error: the server is gone
    return;
  }
}

void Agent::parse_frames() {
  std::size_t pos = 0;
  while (in_.size() - pos >= kFrameHeader) {
    char head[kFrameHeader];
    std::memcpy(head, in_.data() + pos, kFrameHeader);
    FrameHeader h = decode_frame_header(head);
    const std::uint32_t limit = h.channel == kControlChannel ? kMaxFrameToAgent : kMaxDataFrame;
    if (h.length > limit)
      protocol_error("frame of " + std::to_string(h.length) + " bytes on channel " +
                     std::to_string(h.channel) + " (limit " + std::to_string(limit) + ")");
    if (in_.size() - pos - kFrameHeader < h.length) break;
    std::string_view payload(in_.data() + pos + kFrameHeader, h.length);
    pos += kFrameHeader + h.length;
    if (h.channel == kControlChannel) {
      on_control(payload);
    } else if (auto err = ch_.on_data(h.channel, payload)) {
      protocol_error(err);
    }
  }
  in_.erase(0, pos);
}

void Agent::on_control(std::string_view payload) {
  auto m = decode_control(payload);
  if (!m)
    protocol_error("malformed control message (" + std::to_string(payload.size()) + " bytes)");
  switch (m->kind) {
    case AgentMsg::kExec: start_exec(std::move(*m->exec)); break;
    case AgentMsg::kSignal: on_signal(m->a, static_cast<AgentSignal>(m->b)); break;
    case AgentMsg::kResize: on_resize(m->a, m->b); break;
    case AgentMsg::kFiles: start_files(m->a, m->c); break;
    case AgentMsg::kCredit:
      if (auto err = ch_.on_credit(m->a, m->b)) protocol_error(err);
      break;
    case AgentMsg::kClose: ch_.on_close(m->a); break;
    case AgentMsg::kListen:
      if (auto err = listeners_.listen(m->a, static_cast<ListenKind>(m->b >> 16),
                                       static_cast<std::uint16_t>(m->b & 0xffff)))
        protocol_error(err);
      break;
    case AgentMsg::kUsageQuery:
      ch_.control(encode_usage(m->a, count_processes(), bytes_used("/workspace")));
      break;
    default:
      protocol_error("message " + std::to_string(static_cast<unsigned>(m->kind)) +
                     " is not for the agent");
  }
}

// The server numbers its channels from 1 and never reuses one on a stream.
void Agent::check_new_channels(const std::vector<std::uint32_t>& ids, const char* what) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::uint32_t c = ids[i];
    if (c == kControlChannel || c >= kAgentChannelBase || ch_.has(c))
      protocol_error(std::string(what) + ": channel " + std::to_string(c) + " is not free");
    for (std::size_t j = 0; j < i; ++j)
      if (ids[j] == c)
        protocol_error(std::string(what) + ": channel " + std::to_string(c) + " given twice");
  }
}

bool Agent::make_exec_fds(const AgentExec& e, CommandFds& child, std::vector<UniqueFd>& keep,
                          AgentFailure& failure, UniqueFd& pty_copy) {
  auto failed = [&](const char* step) {
    failure.err = errno;
    failure.step = step;
    return false;
  };
  // The child's ends (closed here once it has its copies) go into `keep`
  // too; ours are registered as channels by the caller.
  auto devnull = [&](int flags) {
    int fd = ::open("/dev/null", flags | O_CLOEXEC);
    if (fd >= 0) keep.emplace_back(fd);
    return fd;
  };
  int p[2];
  if (e.pty_rows != 0) {
    // A terminal: the master both ways on its one channel (a socket's kind:
    // a read error, EIO once the last slave closed, is its EOF).
    AgentPty pty = open_pty(e.pty_cols, e.pty_rows);
    if (!pty.master) {
      errno = pty.err;
      return failed(pty.step.c_str());  // copied into failure.step at once
    }
    child.in = child.out = child.err = pty.slave.get();
    child.ctty = true;
    pty_copy.reset(::fcntl(pty.master.get(), F_DUPFD_CLOEXEC, 0));
    if (!pty_copy) return failed("dup pty");
    keep.push_back(std::move(pty.slave));
    ch_.add(e.ch_stdin, ChannelKind::kSocket, std::move(pty.master), e.id);
    return true;
  }
  if (e.ch_stdin) {
    if (::pipe2(p, O_CLOEXEC) != 0) return failed("pipe");
    keep.emplace_back(p[0]);
    child.in = p[0];
    ch_.add(e.ch_stdin, ChannelKind::kStdin, UniqueFd(p[1]), e.id);
  } else if ((child.in = devnull(O_RDONLY)) < 0) {
    return failed("open /dev/null");
  }
  for (auto [id, slot] : {std::pair{e.ch_stdout, &child.out}, std::pair{e.ch_stderr, &child.err}}) {
    if (id) {
      if (::pipe2(p, O_CLOEXEC) != 0) return failed("pipe");
      keep.emplace_back(p[1]);
      *slot = p[1];
      ch_.add(id, ChannelKind::kOutput, UniqueFd(p[0]), e.id);
    } else if ((*slot = devnull(O_WRONLY)) < 0) {
      return failed("open /dev/null");
    }
  }
  if (e.ch_fd3) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p) != 0) return failed("socketpair");
    keep.emplace_back(p[1]);
    child.fd3 = p[1];
    ch_.add(e.ch_fd3, ChannelKind::kSocket, UniqueFd(p[0]), e.id);
  }
  return true;
}

UniqueFd open_listener(std::uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd.get(), 64) != 0)
    return UniqueFd();
  return fd;
}

void Agent::start_exec(AgentExec e) {
  if (execs_.count(e.id)) protocol_error("exec id " + std::to_string(e.id) + " is in use");
  std::vector<std::uint32_t> ids;
  for (std::uint32_t c : {e.ch_stdin, e.ch_stdout, e.ch_stderr, e.ch_fd3})
    if (c) ids.push_back(c);
  check_new_channels(ids, "exec");
  AgentFailure failure{e.id, 0, ""};
  // The server made its ends of every channel it named: all are closed
  // back before the failure, or it would hold them for ever.
  auto fail = [&](int err, const char* step) {
    for (std::uint32_t c : ids) ch_.abandon(c, c != e.ch_stdin || e.pty_rows != 0);
    failure.err = err;
    failure.step = step;
    ch_.control(encode_failure(failure));
  };
  if (ch_.size() + ids.size() > kMaxChannels || execs_.size() >= kMaxChannels)
    return fail(EMFILE, "channels");
  bool bad = has_nul(e.cwd);
  for (const auto& s : e.argv) bad = bad || has_nul(s);
  for (const auto& s : e.env) bad = bad || has_nul(s);
  if (bad) return fail(EINVAL, "argv");
  Exec x;
  x.id = e.id;
  // The listener in a network namespace of the command's own where the
  // engine allows it (own_net.h), else in the container's.
  const bool own_net = e.listen_port != 0 && own_netns_supported();
  if (e.listen_port && !own_net) {
    x.listener = open_listener(e.listen_port);
    if (!x.listener) return fail(errno, "listen");
  }
  CommandFds child;
  std::vector<UniqueFd> keep;
  SpawnOutcome out;
  UniqueFd pty;
  if (make_exec_fds(e, child, keep, failure, pty)) {
    out = spawn_command(e, child, own_net);
  } else {
    out.err = failure.err;
    out.step = failure.step;
  }
  keep.clear();  // the child's ends: it has its own copies now
  if (out.pid <= 0) {
    // The keeper, when there was one, was reaped in spawn_command, out of
    // reap()'s sight: whatever it left is swept here.
    kill_escaped();
    return fail(out.err, out.step.c_str());
  }
  x.pid = out.pid;
  x.cmd_pid = out.command_pid;
  if (own_net) x.listener = std::move(out.listener);
  x.pty = std::move(pty);
  x.channels = ids;
  if (e.timeout_ms)
    x.deadline =
        now_ms() + static_cast<std::int64_t>(std::min<std::uint64_t>(e.timeout_ms, 1ULL << 40));
  exec_by_pid_[x.pid] = x.id;
  ch_.control(encode_started(x.id, static_cast<std::uint32_t>(x.cmd_pid)));
  execs_.emplace(x.id, std::move(x));
}

void Agent::start_files(std::uint32_t ch, std::uint64_t rlimit_fsize) {
  check_new_channels({ch}, "files");
  AgentFailure failure{ch, EMFILE, "channels"};
  auto fail = [&] {
    ch_.abandon(ch, true);
    ch_.control(encode_failure(failure));
  };
  if (ch_.size() + 1 > kMaxChannels) return fail();
  pid_t pid = -1;
  UniqueFd ours = start_file_worker(rlimit_fsize, &pid, failure);
  if (!ours) return fail();
  file_workers_.insert(pid);
  ch_.add(ch, ChannelKind::kFiles, std::move(ours), std::nullopt);
}

void Agent::on_signal(std::uint32_t id, AgentSignal s) {
  auto it = execs_.find(id);
  if (it == execs_.end() || it->second.reaped) return;
  Exec& x = it->second;
  if (s == AgentSignal::kInterrupt) {
    ::kill(x.cmd_pid, SIGINT);
    return;
  }
  if (!x.killed) x.end = AgentEnd::kCancelled;
  kill_exec_tree(x);
}

void Agent::on_resize(std::uint32_t id, std::uint32_t size) {
  auto it = execs_.find(id);
  if (it == execs_.end() || !it->second.pty) return;
  const auto cols = static_cast<std::uint16_t>(size >> 16), rows = static_cast<std::uint16_t>(size & 0xffff);
  if (cols != 0 && rows != 0) (void)resize_pty(it->second.pty.get(), cols, rows);
}

// SIGKILL to the command's process group and to everything under its
// keeper; the keeper itself lives on to reap them, kill what they leave and
// end as the command did (command.h). SIGCONT in case it was stopped.
void Agent::kill_exec_tree(Exec& x) {
  x.killed = true;
  if (!x.reaped) {
    ::kill(-x.cmd_pid, SIGKILL);
    std::set<pid_t> seen;
    for (int round = 0; round < 4; ++round)
      if (kill_trees(children_of(x.pid), seen) == 0) break;
    ::kill(x.pid, SIGCONT);
  }
  kill_escaped();
}

// A child of the agent that is neither a live keeper nor a file worker came
// from a keeper that died before its command (killed by a process of the
// sandbox's uid): nothing owns it, so it ends. Called at every reap: an
// orphan is the agent's child before its parent can be reaped, so each
// death of one reaches the next.
void Agent::kill_escaped() {
  std::vector<pid_t> roots;
  for (pid_t c : children_of(::getpid()))
    if (!exec_by_pid_.count(c) && !file_workers_.count(c)) roots.push_back(c);
  std::set<pid_t> seen;
  (void)kill_trees(roots, seen);
}

void Agent::on_main_exit(Exec& x) {
  x.drain_deadline = now_ms() + kDrainWaitMs;
  kill_exec_tree(x);
  x.listener.reset();
  for (std::uint32_t c : x.channels) ch_.end_of_command(c);
  try_finish(x.id);
}

// kDone once the main process is reaped and every channel it could still
// send on has been drained.
void Agent::try_finish(std::uint32_t id) {
  auto it = execs_.find(id);
  if (it == execs_.end() || !it->second.reaped) return;
  Exec& x = it->second;
  for (std::uint32_t c : x.channels)
    if (ch_.still_reading(c)) return;
  for (std::uint32_t c : x.channels) ch_.close(c);
  x.done.id = x.id;
  x.done.end = x.end;
  ch_.control(encode_done(x.done));
  execs_.erase(it);
}

void Agent::reap() {
  struct signalfd_siginfo si;
  while (::read(sigfd_.get(), &si, sizeof si) > 0) {
  }
  bool any = false;
  for (;;) {
    int st = 0;
    struct rusage ru {};
    pid_t p = ::wait4(-1, &st, WNOHANG, &ru);
    if (p < 0 && errno == EINTR) continue;
    if (p <= 0) break;
    any = true;
    file_workers_.erase(p);
    auto it = exec_by_pid_.find(p);
    if (it == exec_by_pid_.end()) continue;
    Exec& x = execs_.at(it->second);
    exec_by_pid_.erase(it);
    x.reaped = true;
    x.done.wait_status = st;
    x.done.cpu_us =
        static_cast<std::uint64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000 +
        static_cast<std::uint64_t>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    x.done.maxrss_kib = static_cast<std::uint64_t>(ru.ru_maxrss);
    on_main_exit(x);
  }
  if (any) kill_escaped();
}

void Agent::check_deadlines() {
  std::int64_t now = now_ms();
  std::vector<std::uint32_t> drained;
  for (auto& [id, x] : execs_) {
    if (x.reaped && now >= x.drain_deadline) drained.push_back(id);
    if (x.reaped || x.killed || x.deadline == 0 || now < x.deadline) continue;
    x.end = AgentEnd::kTimeout;
    kill_exec_tree(x);
  }
  for (std::uint32_t id : drained) {
    auto it = execs_.find(id);
    if (it == execs_.end()) continue;
    log("exec " + std::to_string(id) + ": output not taken in time, channels closed");
    for (std::uint32_t c : it->second.channels) ch_.close(c, true);
    try_finish(id);
  }
}

// The next time check_deadlines has something to do (0: none).
std::int64_t Agent::next_deadline() const {
  std::int64_t next = 0;
  auto consider = [&](std::int64_t t) {
    if (t && (next == 0 || t < next)) next = t;
  };
  for (const auto& [id, x] : execs_) {
    if (x.reaped)
      consider(x.drain_deadline);
    else if (!x.killed)
      consider(x.deadline);
  }
  consider(listeners_.next_deadline());
  return next;
}

void Agent::accept_on(Exec& x) {
  for (;;) {
    struct sockaddr_in client {};
    struct sockaddr_in server {};
    socklen_t client_len = sizeof client;
    socklen_t server_len = sizeof server;
    UniqueFd conn(::accept4(x.listener.get(), reinterpret_cast<struct sockaddr*>(&client),
                            &client_len, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!conn) return;
    if (ch_.size() >= kMaxChannels || next_agent_channel_ == 0) {
      log("too many channels: a connection to the listener was closed");
      continue;
    }
    // The listener leads out of the sandbox (the installer's proxy): only
    // the exec's own session may use it, not the rest of the container.
    // A refused connection is closed at once: its client sees EOF.
    std::string why;
    if (client_len != sizeof client || client.sin_family != AF_INET ||
        ::getsockname(conn.get(), reinterpret_cast<struct sockaddr*>(&server), &server_len) != 0 ||
        !connection_from_session(client, server, x.cmd_pid, why)) {
      log("exec " + std::to_string(x.id) + ": refused a connection to its listener from port " +
          std::to_string(ntohs(client.sin_port)) + ": " + (why.empty() ? "no address" : why));
      continue;
    }
    std::uint32_t id = next_agent_channel_++;
    ch_.add(id, ChannelKind::kSocket, std::move(conn), x.id);
    x.channels.push_back(id);
    ch_.control(encode_accepted(x.id, id));
  }
}

void Agent::kill_everything() {
  for (auto& [id, x] : execs_)
    if (!x.reaped) kill_exec_tree(x);
  for (pid_t p : file_workers_) ::kill(p, SIGKILL);
}

int Agent::run() {
  // Not dumpable: another process of the sandbox's uid could otherwise open
  // /proc/<agent>/fd/{0,1} and write frames into the stream (or read the
  // server's), or take the agent over through /proc/<agent>/mem. Commands
  // are dumpable again after their execve; a file worker (forked only)
  // keeps this.
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
    log(errno_line("prctl(PR_SET_DUMPABLE)", errno));
    return 1;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, nullptr);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  sigfd_.reset(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!sigfd_ || !set_nonblock(0) || !set_nonblock(1)) {
    log(errno_line("setup failed", errno));
    return 1;
  }
  ch_.control(encode_hello(static_cast<std::uint32_t>(::getpid())));
  std::vector<struct pollfd> pfds;
  std::vector<std::uint32_t> who;  // per pollfd past the first three: channel, or exec id
  std::vector<bool> is_listener;
  for (;;) {
    if (!ch_.flush()) server_eof_ = true;
    if (server_eof_) {
      kill_everything();
      return 0;
    }
    pfds.clear();
    who.clear();
    is_listener.clear();
    pfds.push_back({0, static_cast<short>(ch_.backlogged() ? 0 : POLLIN), 0});
    pfds.push_back({1, static_cast<short>(ch_.pending_out() ? POLLOUT : 0), 0});
    pfds.push_back({sigfd_.get(), POLLIN, 0});
    ch_.poll_set(pfds, who);
    is_listener.assign(who.size(), false);
    for (auto& [id, x] : execs_) {
      if (x.listener) {
        pfds.push_back({x.listener.get(), POLLIN, 0});
        who.push_back(id);
        is_listener.push_back(true);
      }
    }
    const std::size_t sandbox_at = pfds.size();
    listeners_.poll_set(pfds);
    int timeout = -1;
    if (std::int64_t next = next_deadline())  // at most a minute at a time: a far one fits no int
      timeout = static_cast<int>(std::clamp<std::int64_t>(next - now_ms() + 1, 0, 60'000));
    int r = ::poll(pfds.data(), pfds.size(), timeout);
    if (r < 0 && errno != EINTR) {
      log(errno_line("poll", errno));
      kill_everything();
      return 1;
    }
    if (r > 0) {
      if (pfds[2].revents) reap();
      if (pfds[0].revents) read_server();
      for (std::size_t i = 3; i < sandbox_at; ++i) {
        if (!pfds[i].revents) continue;
        std::uint32_t id = who[i - 3];
        if (!is_listener[i - 3]) {
          ch_.on_ready(id, pfds[i].revents);
        } else if (auto it = execs_.find(id); it != execs_.end() && it->second.listener) {
          accept_on(it->second);
        }
      }
      listeners_.on_ready(pfds.data() + sandbox_at, pfds.size() - sandbox_at);
    }
    ch_.resume_drains();
    for (std::uint32_t id : ch_.take_finished_execs()) try_finish(id);
    check_deadlines();
    listeners_.expire(now_ms());
  }
}

}  // namespace

int run_serve() {
  Agent agent;
  return agent.run();
}

}  // namespace sandcastle::sandbox::engine::agent
