// The server's side of the agent protocol, for tests: runs the built static
// sandcastle-agent (`serve`) as a child with pipes and speaks agent_wire.h to
// it from one thread. Sends respect the agent's credit; received data is
// credited back at once unless a channel holds its credit.
#pragma once

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/engine/agent_wire.h"

namespace sandcastle::sandbox::engine::agent_test {

using namespace std::chrono_literals;

inline bool pid_gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

// Waits (polling /proc, as there is no event for another tree's process)
// until pid has disappeared.
inline bool wait_gone(pid_t pid, std::chrono::milliseconds limit = 5s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (!pid_gone(pid)) {
    if (std::chrono::steady_clock::now() > end) return false;
    ::usleep(2000);
  }
  return true;
}

struct Chan {
  std::string data;                // received
  bool eof = false;                // the agent's EOF frame
  bool closed = false;             // the agent's kClose
  std::uint32_t credit = kWindow;  // what we may still send
  std::string pending;             // queued for sending
  bool eof_queued = false;
  bool eof_sent = false;
  bool hold_credit = false;  // do not credit received data back (yet)
  bool raw = false;          // the test sends on it itself (send_raw): no credit check
  std::uint64_t uncredited = 0;
  std::uint64_t sent = 0;
};

// How the agent is started: as another user (its bounding set emptied
// first, as in a container), with fewer descriptors.
struct AgentOptions {
  uid_t uid = 0;      // 0: as the test runs
  rlim_t nofile = 0;  // 0: as is
};

// What happened, in order: "ctl:<kind>:<a>", "eof:<ch>", "close:<ch>".
class AgentProc {
 public:
  explicit AgentProc(AgentOptions o = {}) {
    ::signal(SIGPIPE, SIG_IGN);  // a write to an agent that has left is EPIPE
    int in[2], out[2];
    EXPECT_EQ(::pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
    // The stream as the agent's user could reach it if nothing else stopped it.
    if (o.uid) {
      for (int fd : {in[0], out[1]}) {
        EXPECT_EQ(::fchown(fd, o.uid, o.uid), 0);
      }
    }
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      // Only 0-2: the agent's own descriptors are counted by some tests.
      (void)syscall(SYS_close_range, 3U, ~0U, 0U);
      if (o.nofile) {
        struct rlimit r {
          o.nofile, o.nofile
        };
        if (::setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(126);
      }
      if (o.uid) {
        for (unsigned long cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
          (void)prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
        if (::setgroups(0, nullptr) != 0 || ::setresgid(o.uid, o.uid, o.uid) != 0 ||
            ::setresuid(o.uid, o.uid, o.uid) != 0)
          _exit(126);
      }
      const char* argv[] = {SANDCASTLE_AGENT_PATH, "serve", nullptr};
      ::execv(argv[0], const_cast<char**>(argv));
      _exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = in[1];
    from_ = out[0];
    ::fcntl(to_, F_SETFL, O_NONBLOCK);
    ::fcntl(from_, F_SETFL, O_NONBLOCK);
    EXPECT_TRUE(pump_until([&] { return !controls.empty(); }));
    if (!controls.empty()) {
      EXPECT_EQ(controls[0].kind, AgentMsg::kHello);
      hello = controls[0];
    }
  }

  ~AgentProc() {
    if (to_ >= 0) ::close(to_);
    if (pid_ > 0 && !exited_) {
      // Closing the stream makes the agent leave; a stuck one is killed.
      for (int i = 0; i < 500 && ::waitpid(pid_, nullptr, WNOHANG) == 0; ++i) ::usleep(10'000);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (from_ >= 0) ::close(from_);
  }

  AgentProc(const AgentProc&) = delete;
  AgentProc& operator=(const AgentProc&) = delete;

  pid_t pid() const { return pid_; }

  void send_raw(const std::string& bytes) { out_ += bytes; }
  void send_control(const std::string& payload) {
    send_raw(encode_frame(kControlChannel, payload));
  }
  void write(std::uint32_t ch, const std::string& data) { chans[ch].pending += data; }
  void close_write(std::uint32_t ch) { chans[ch].eof_queued = true; }
  void release_credit(std::uint32_t ch) {
    Chan& c = chans[ch];
    c.hold_credit = false;
    if (c.uncredited) send_control(encode_credit(ch, static_cast<std::uint32_t>(c.uncredited)));
    c.uncredited = 0;
  }

  // Closes our end of the stream (the server going away).
  void close_stream() {
    ::close(to_);
    to_ = -1;
  }

  // Moves bytes both ways until pred() holds or the time is up.
  bool pump_until(const std::function<bool()>& pred, std::chrono::milliseconds limit = 10s) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!pred()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !pump_once(static_cast<int>(left.count()))) return pred();
    }
    return true;
  }
  void pump_for(std::chrono::milliseconds d) {
    (void)pump_until([] { return false; }, d);
  }

  // The agent's exit status (waits for it).
  int wait_exit(std::chrono::milliseconds limit = 5s) {
    int st = -1;
    (void)pump_until([&] { return agent_eof_; }, limit);
    for (int i = 0; i < 500; ++i) {
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        exited_ = true;
        return st;
      }
      ::usleep(10'000);
    }
    return -1;
  }

  const AgentControl* find(AgentMsg kind, std::uint32_t a) const {
    for (const auto& c : controls)
      if (c.kind == kind && c.a == a) return &c;
    return nullptr;
  }
  // The first kDone, kExecFailed for exec `id`, after pumping for it.
  const AgentControl* wait_end(std::uint32_t id, std::chrono::milliseconds limit = 10s) {
    (void)pump_until([&] { return find(AgentMsg::kDone, id) || find(AgentMsg::kExecFailed, id); },
                     limit);
    if (auto* d = find(AgentMsg::kDone, id)) return d;
    return find(AgentMsg::kExecFailed, id);
  }
  // Exec `id`'s kDone after pumping for it; null, with the test failed
  // saying why, when it failed to start or did not end within `limit`.
  const AgentDone* wait_done(std::uint32_t id, std::chrono::milliseconds limit = 10s) {
    const AgentControl* end = wait_end(id, limit);
    if (!end) {
      ADD_FAILURE() << "exec " << id << " did not end within " << limit.count() << " ms";
      return nullptr;
    }
    if (end->kind != AgentMsg::kDone || !end->done) {
      ADD_FAILURE() << "exec " << id << " failed to start: "
                    << (end->failure
                            ? end->failure->step + " errno " + std::to_string(end->failure->err)
                            : std::string("?"));
      return nullptr;
    }
    return &*end->done;
  }
  // Sends exec `e`, then wait_done.
  const AgentDone* run(const AgentExec& e, std::chrono::milliseconds limit = 10s) {
    send_control(encode_exec(e));
    return wait_done(e.id, limit);
  }
  std::size_t event_index(const std::string& ev) const {
    for (std::size_t i = 0; i < events.size(); ++i)
      if (events[i] == ev) return i;
    return events.size();
  }

  std::uint32_t new_channel() { return next_channel_++; }

  AgentControl hello;
  std::vector<AgentControl> controls;
  std::vector<std::string> events;
  std::map<std::uint32_t, Chan> chans;
  std::size_t max_frame = 0;

 private:
  bool pump_once(int timeout_ms) {
    for (auto& [id, c] : chans) {
      while (!c.pending.empty() && c.credit > 0) {
        std::size_t n = std::min<std::size_t>({c.pending.size(), c.credit, kMaxDataFrame});
        out_ += encode_frame(id, std::string_view(c.pending).substr(0, n));
        c.pending.erase(0, n);
        c.credit -= static_cast<std::uint32_t>(n);
        c.sent += n;
      }
      if (c.pending.empty() && c.eof_queued && !c.eof_sent) {
        out_ += encode_frame(id, {});
        c.eof_sent = true;
      }
    }
    struct pollfd p[2] = {{from_, POLLIN, 0},
                          {to_, static_cast<short>(out_.empty() ? 0 : POLLOUT), 0}};
    int r = ::poll(p, to_ >= 0 ? 2 : 1, std::min(timeout_ms, 50));
    if (r < 0) return errno == EINTR;
    if (to_ >= 0 && (p[1].revents & (POLLOUT | POLLERR))) {
      ssize_t n = ::write(to_, out_.data(), out_.size());
      if (n > 0) out_.erase(0, static_cast<std::size_t>(n));
      if (n < 0 && errno == EPIPE) out_.clear();
    }
    if (p[0].revents) {
      char buf[65536];
      ssize_t n = ::read(from_, buf, sizeof buf);
      if (n == 0) {
        agent_eof_ = true;
        return false;
      }
      if (n > 0) in_.append(buf, static_cast<std::size_t>(n));
      parse();
    }
    return true;
  }

  void parse() {
    std::size_t pos = 0;
    while (in_.size() - pos >= kFrameHeader) {
      char head[kFrameHeader];
      std::memcpy(head, in_.data() + pos, kFrameHeader);
      FrameHeader h = decode_frame_header(head);
      EXPECT_LE(h.length, kMaxFrameFromAgent);
      if (in_.size() - pos - kFrameHeader < h.length) break;
      std::string payload = in_.substr(pos + kFrameHeader, h.length);
      pos += kFrameHeader + h.length;
      max_frame = std::max<std::size_t>(max_frame, h.length);
      if (h.channel != kControlChannel) {
        Chan& c = chans[h.channel];
        if (payload.empty()) {
          c.eof = true;
          events.push_back("eof:" + std::to_string(h.channel));
          continue;
        }
        EXPECT_FALSE(c.eof) << "data after EOF on " << h.channel;
        c.data += payload;
        if (c.hold_credit) {
          c.uncredited += payload.size();
          EXPECT_LE(c.uncredited, kWindow) << "the agent sent past its window";
        } else {
          send_control(encode_credit(h.channel, static_cast<std::uint32_t>(payload.size())));
        }
        continue;
      }
      auto m = decode_control(payload);
      EXPECT_TRUE(m.has_value()) << "malformed control message from the agent";
      if (!m) continue;
      // decode_control leaves `a` at 0 for these two: their id is inside.
      if (m->done) m->a = m->done->id;
      if (m->failure) m->a = m->failure->id;
      if (m->kind == AgentMsg::kCredit) {
        Chan& c = chans[m->a];
        c.credit += m->b;
        if (!c.raw) {
          EXPECT_LE(c.credit, kWindow);
        }
        continue;
      }
      if (m->kind == AgentMsg::kClose) {
        chans[m->a].closed = true;
        events.push_back("close:" + std::to_string(m->a));
        continue;
      }
      events.push_back("ctl:" + std::to_string(static_cast<std::uint32_t>(m->kind)) + ":" +
                       std::to_string(m->a));
      controls.push_back(*m);
    }
    in_.erase(0, pos);
  }

  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
  bool exited_ = false;
  bool agent_eof_ = false;
  std::string out_;
  std::string in_;
  std::uint32_t next_channel_ = 1;
};

// Whether the agent can give a listening exec network and user namespaces
// of its own (own_net.h): it tries the same.
// Asked of a fresh program, not of a fork of this one: a sanitizer's
// runtime (TSan's threads) can make unshare(CLONE_NEWUSER) fail in a fork of
// the test binary where the static agent succeeds.
inline bool own_netns_available() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/usr/bin/unshare", "unshare", "--user", "--net", "/bin/true",
            static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

// An exec request with stdout and stderr channels and PATH set.
inline AgentExec make_exec(AgentProc& a, std::uint32_t id, std::vector<std::string> argv) {
  AgentExec e;
  e.id = id;
  e.argv = std::move(argv);
  e.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"};
  e.cwd = "/";
  e.ch_stdout = a.new_channel();
  e.ch_stderr = a.new_channel();
  return e;
}

}  // namespace sandcastle::sandbox::engine::agent_test
