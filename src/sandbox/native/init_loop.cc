#include "sandbox/native/init_loop.h"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "sandbox/native/fd_passing.h"
#include "sandbox/native/file_worker.h"
#include "sandbox/native/layer_export.h"
#include "sandbox/native/net.h"
#include "sandbox/native/persist_mirror.h"
#include "sandbox/native/supervisor.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {
namespace {

using Clock = std::chrono::steady_clock;

// The image's rw/ dir (init_main keeps it from before pivot_root), or -1.
// Init is single-threaded; every child but the layer worker closes it.
int g_rw_fd = -1;

void close_rw_fd() {
  if (g_rw_fd >= 0) ::close(g_rw_fd);
  g_rw_fd = -1;
}

void reap_children() {
  int status = 0;
  while (::waitpid(-1, &status, WNOHANG) > 0) {
  }
}

// One supervisor started ahead of the next exec (see run_supervisor), so
// an exec costs a message rather than two process creations and a seccomp
// load. Started again right after it is used, while the command runs.
struct Slot {
  pid_t pid = -1;
  int fd = -1;  // our end of its request socket
  // Set: its command is started already (kAhead), for this exec only; kept
  // however long it waits (the server asked for it).
  std::optional<AheadWire> ahead;
};

// The sandbox's exec slots: the one waiting for an exec, and those whose
// supervisor runs one and takes another once it is over (kSlotReady).
struct Slots {
  Slot ready;
  std::vector<int> busy;  // our ends of their request sockets
};

// In a child of init: no copy of a slot's socket may outlive init's, or its
// supervisor never sees the EOF that ends it.
void close_slots(const Slots& slots) {
  if (slots.ready.fd >= 0) ::close(slots.ready.fd);
  for (int fd : slots.busy) ::close(fd);
}

// own_netns: the supervisor (and so its command) also gets a network
// namespace of its own, for one exec with a listen_port (never a waiting slot).
Slot start_slot(int control_fd, int signal_fd, const InitConfig& config, const Slots& others,
                bool own_netns = false, std::optional<AheadWire> ahead = std::nullopt) {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return {};
  // A fork into a new PID namespace: the child is that namespace's PID 1.
  const unsigned long flags = CLONE_NEWPID | (own_netns ? CLONE_NEWNET : 0) | SIGCHLD;
  long pid = syscall(SYS_clone, flags, nullptr, nullptr, nullptr, nullptr);
  if (pid == 0) {
    ::close(control_fd);
    ::close(sp[0]);
    close_slots(others);
    close_rw_fd();
    run_supervisor(sp[1], config, signal_fd, own_netns, ahead ? &*ahead : nullptr);
  }
  int err = errno;
  ::close(sp[1]);
  if (pid < 0) {
    ::close(sp[0]);
    errno = err;
    return {};
  }
  return Slot{static_cast<pid_t>(pid), sp[0], std::move(ahead)};
}

// Returns whether the request was the sandbox's last exec (ExecWire::last).
bool start_exec(int control_fd, int signal_fd, const InitConfig& config, std::string_view payload,
                ReceivedMessage& m, Slots& slots) {
  auto req = decode_exec(payload);
  if (!req || m.nfds < kExecRequestFds || m.nfds > kExecRequestMaxFds) return false;
  int err = 0;
  const char* step = "start exec supervisor";
  if (req->listen_port != 0) {
    // A waiting slot is in the sandbox's network namespace already: this
    // exec gets a supervisor of its own, made in a new one.
    step = "start exec supervisor in a network namespace of its own";
    Slot own = start_slot(control_fd, signal_fd, config, slots, true);
    err = own.fd >= 0 ? send_with_fds(own.fd, payload, m.fds, m.nfds) : errno;
    if (own.fd >= 0) ::close(own.fd);
  } else {
    // A started command takes only its own exec: any other gets a new slot.
    Slot& ready = slots.ready;
    if (ready.ahead && (!ahead_matches(*ready.ahead, *req) || m.nfds != kExecRequestFds)) {
      ::close(ready.fd);
      ready = {};
    }
    // The ready slot, or (if it died, or a concurrent exec took it before it
    // was replaced) a new one.
    Slot taken = std::exchange(ready, Slot{});
    err = taken.fd >= 0 ? send_with_fds(taken.fd, payload, m.fds, m.nfds) : EPIPE;
    if (err != 0) {
      if (taken.fd >= 0) ::close(taken.fd);
      taken = start_slot(control_fd, signal_fd, config, slots);
      err = taken.fd >= 0 ? send_with_fds(taken.fd, payload, m.fds, m.nfds) : errno;
    }
    // A plain supervisor comes back for another exec once this one is over
    // (run_supervisor); any other ends with it.
    if (err == 0 && !taken.ahead && !req->last && req->pty_rows == 0)
      slots.busy.push_back(taken.fd);
    else if (taken.fd >= 0)
      ::close(taken.fd);
  }
  if (err != 0) {
    ExecReport rep;
    rep.kind = ReportKind::kSetupError;
    rep.err = err;
    rep.step = step;
    std::string bytes = encode(rep);
    (void)!::send(m.fds[0], bytes.data(), bytes.size(), MSG_NOSIGNAL);
  }
  return req->last;
}

// A file worker for the server's channel (file_worker.h). Init keeps no
// copy of the channel: the server closing its end is the worker's EOF.
void start_file_worker(int control_fd, int signal_fd, const InitConfig& config,
                       std::string_view payload, ReceivedMessage& m, const Slots& slots) {
  auto limits = decode_files(payload);
  if (!limits || m.nfds != 1) return;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(control_fd);
    ::close(signal_fd);
    close_slots(slots);
    close_rw_fd();
    run_file_worker(m.fds[0], config, *limits);
  }
  // On failure the server sees EOF at once and says the worker did not start.
}

// save_sandbox's layer worker (layer_export.h), one per save.
void start_layer_worker(int control_fd, int signal_fd, const InitConfig& config,
                        std::string_view payload, ReceivedMessage& m, const Slots& slots) {
  auto limits = decode_layer_export(payload);
  if (!limits || m.nfds != 1) return;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(control_fd);
    ::close(signal_fd);
    close_slots(slots);
    run_layer_export(m.fds[0], g_rw_fd, config, *limits);
  }
}

// The last persist worker, as a pidfd (a pid could be reused once reaped).
int g_mirror_pidfd = -1;

// Killed, stopped or not (the sandbox's uid can SIGSTOP it; SIGKILL still
// ends it), so that two workers never write one storage.
void stop_mirror_worker() {
  if (g_mirror_pidfd < 0) return;
  (void)syscall(SYS_pidfd_send_signal, g_mirror_pidfd, SIGKILL, nullptr, 0);
  ::close(g_mirror_pidfd);
  g_mirror_pidfd = -1;
}

// A persistent sandbox's copy on disk brought up to date, or copied back
// (persist_mirror.h); one worker per request, one at a time.
void start_mirror_worker(int control_fd, int signal_fd, const InitConfig& config,
                         std::string_view payload, ReceivedMessage& m, const Slots& slots) {
  auto w = decode_persist_mirror(payload);
  if (!w) return;
  stop_mirror_worker();
  if (w->direction == MirrorDirection::kAbort || m.nfds < 2 || m.nfds > 3) return;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(control_fd);
    ::close(signal_fd);
    close_slots(slots);
    run_persist_mirror(m.fds[0], m.fds[1], m.nfds == 3 ? m.fds[2] : -1, g_rw_fd, config, *w);
  }
  if (pid > 0) g_mirror_pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
}

// The server's proxy and DNS sockets (wire.h kNetListeners), opened by init
// itself in the sandbox's network namespace; the answer carries an errno per
// socket and the opened ones. Init keeps no copy.
void open_net_listeners(std::string_view payload, ReceivedMessage& m) {
  auto w = decode_net_listeners(payload);
  if (!w || m.nfds != 1) return;
  WireWriter o;
  int fds[kMaxNetListeners];
  int n = 0;
  for (const auto& want : w->want) {
    int fd = -1;
    auto err =
        want.udp ? open_loopback_udp(want.port, &fd) : open_loopback_listener(want.port, &fd);
    o.i32(err ? (err->err != 0 ? err->err : EIO) : 0);
    if (!err) fds[n++] = fd;
  }
  std::string bytes = o.bytes();
  (void)send_with_fds(m.fds[0], bytes, fds, n);
  for (int i = 0; i < n; ++i) ::close(fds[i]);
}

// The waiting slot replaced by one whose command starts now (AheadWire).
void start_ahead(int control_fd, int signal_fd, const InitConfig& config, std::string_view payload,
                 Slots& slots) {
  auto ahead = decode_ahead(payload);
  if (!ahead) return;
  if (slots.ready.fd >= 0) ::close(slots.ready.fd);  // its supervisor and child exit
  slots.ready = {};
  slots.ready = start_slot(control_fd, signal_fd, config, slots, false, std::move(*ahead));
}

// Receives one request; returns false when the server has gone away.
// `last`: it was an exec the server said is the last (start no next slot).
bool handle_request(int control_fd, int signal_fd, const InitConfig& config, char* buf,
                    Slots& slots, bool& last) {
  ReceivedMessage m = recv_with_fds(control_fd, buf, kMaxExecRequestBytes + 1);
  if (m.len == 0) return false;
  if (m.len < 0) return m.err == EINTR || m.err == EAGAIN;
  auto msg = decode_control(std::string_view(buf, static_cast<std::size_t>(m.len)));
  if (msg && !m.truncated) {
    switch (msg->kind) {
      case ControlKind::kExec:
        last = start_exec(control_fd, signal_fd, config, msg->payload, m, slots);
        break;
      case ControlKind::kFiles:
        start_file_worker(control_fd, signal_fd, config, msg->payload, m, slots);
        break;
      case ControlKind::kSaveLayer:
        start_layer_worker(control_fd, signal_fd, config, msg->payload, m, slots);
        break;
      case ControlKind::kPersistMirror:
        start_mirror_worker(control_fd, signal_fd, config, msg->payload, m, slots);
        break;
      case ControlKind::kNetListeners: open_net_listeners(msg->payload, m); break;
      case ControlKind::kAhead:
        start_ahead(control_fd, signal_fd, config, msg->payload, slots);
        break;
    }
  }
  m.close_fds();
  return true;
}

}  // namespace

struct InitLoop::State {
  int control_fd = -1;
  int signal_fd = -1;
  const InitConfig* config = nullptr;
  Slots slots;
};

InitLoop::InitLoop() : st_(new State) {}
InitLoop::~InitLoop() { delete st_; }

bool InitLoop::start(int control_fd, const InitConfig& config, int rw_fd) {
  g_rw_fd = rw_fd;
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  st_->signal_fd = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (st_->signal_fd < 0) return false;
  st_->control_fd = control_fd;
  st_->config = &config;
  return true;
}

void InitLoop::start_first_slot() {
  st_->slots.ready = start_slot(st_->control_fd, st_->signal_fd, *st_->config, st_->slots);
}

namespace {

// A supervisor back from its exec (kSlotReady) becomes the waiting slot,
// in place of a plain one made meanwhile (kRefillAfter); it ends if a
// started command waits there, or none is wanted. One that said anything
// else, or is gone, is dropped. Nothing to read after all (a spurious
// wake-up): it is still busy, and stays polled.
enum class Back { kBusy, kReady, kDropped };
Back take_back(int fd, Slot& ready, bool wanted) {
  char c = 0;
  ssize_t got = ::recv(fd, &c, 1, MSG_DONTWAIT);
  if (got < 0 && (errno == EAGAIN || errno == EINTR)) return Back::kBusy;
  if (got == 1 && c == kSlotReady && wanted && !ready.ahead) {
    if (ready.fd >= 0) ::close(ready.fd);  // its supervisor and child exit
    ready = Slot{-1, fd, std::nullopt};
    return Back::kReady;
  }
  ::close(fd);  // its supervisor sees EOF and exits
  return Back::kDropped;
}

}  // namespace

int InitLoop::run() {
  // Uninitialized: only what a request fills is ever touched (a zeroed
  // buffer is 200 KiB of dirty memory in every sandbox).
  auto buf = std::make_unique_for_overwrite<char[]>(kMaxExecRequestBytes + 1);
  Slots& slots = st_->slots;
  Slot& slot = slots.ready;
  // A sandbox idle for kSlotIdle sheds its waiting slot (two processes); the
  // next exec starts one on demand, and the slot is kept while execs follow.
  bool shed = false;
  bool done = false;  // the server's last exec came (ExecWire::last)
  auto last_request = std::chrono::steady_clock::now();
  // An exec's supervisor comes back for the next one once it is over
  // (kSlotReady). A new slot is made only if none is back within
  // kRefillAfter (a long exec), or once one that does not come back has
  // ended (its SIGCHLD): made at once, it would compete with that exec for
  // the CPU (a short command's whole run).
  constexpr Clock::time_point kNone = Clock::time_point::max();
  Clock::time_point refill_at = kNone;  // kNone: no wait
  auto refill = [&] {
    if (slot.fd < 0 && !shed && refill_at == kNone)
      slot = start_slot(st_->control_fd, st_->signal_fd, *st_->config, slots);
  };
  std::vector<struct pollfd> pfds;
  for (;;) {
    const auto now = Clock::now();
    if (now >= refill_at) refill_at = kNone;
    refill();
    int timeout_ms = -1;
    if (slot.fd >= 0 && !slot.ahead) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(last_request + kSlotIdle -
                                                                        std::chrono::steady_clock::now());
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    if (refill_at != kNone) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(refill_at - now);
      timeout_ms = static_cast<int>(std::max<long long>(0, left.count()));
    }
    pfds.assign({{st_->control_fd, POLLIN, 0}, {st_->signal_fd, POLLIN, 0}});
    for (int fd : slots.busy) pfds.push_back({fd, POLLIN, 0});
    int ready = ::poll(pfds.data(), static_cast<nfds_t>(pfds.size()), timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return 1;
    }
    if (ready == 0 && refill_at != kNone) continue;
    if (ready == 0) {
      // Closing our end makes the supervisor's recv see EOF: it and its
      // waiting child exit, and SIGCHLD reaps them.
      ::close(slot.fd);
      slot = {};
      shed = true;
      continue;
    }
    // Supervisors back from their exec, before a request that came with them.
    std::vector<int> still_busy;
    for (std::size_t i = 2; i < pfds.size(); ++i) {
      if (!pfds[i].revents) {
        still_busy.push_back(pfds[i].fd);
      } else if (pfds[i].revents & POLLIN) {
        switch (take_back(pfds[i].fd, slot, !shed && !done)) {
          case Back::kBusy: still_busy.push_back(pfds[i].fd); break;
          case Back::kReady: refill_at = kNone; break;
          case Back::kDropped: break;
        }
      } else {
        ::close(pfds[i].fd);  // gone (POLLHUP, POLLERR)
      }
    }
    slots.busy = std::move(still_busy);
    if (pfds[1].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(st_->signal_fd, &si, sizeof si) > 0) {
      }
      reap_children();
      // Before a request that came with the signal: a slot is there for it
      // (unless one is on its way back).
      if (slots.busy.empty()) {
        refill_at = kNone;
        refill();
      }
    }
    if (pfds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      // Server gone (EOF): returning ends PID 1, and the kernel kills the rest.
      bool last = false;
      if (!handle_request(st_->control_fd, st_->signal_fd, *st_->config, buf.get(), slots, last))
        return 0;
      last_request = std::chrono::steady_clock::now();
      if (slot.fd < 0) refill_at = last_request + kRefillAfter;
      // After a one-shot's command no slot again (an exec sent anyway
      // gets a supervisor of its own, start_exec).
      done = done || last;
      shed = done;
      if (done && slot.fd >= 0) {  // (a last exec with a listen_port left it)
        ::close(slot.fd);
        slot = {};
      }
    }
  }
}

}  // namespace sandcastle::sandbox::native
