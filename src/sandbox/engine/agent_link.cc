#include "sandbox/engine/agent_link.h"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace sandcastle::sandbox::engine {

struct AgentLink::Channel {
  UniqueFd fd;
  std::string to_local;            // from the agent, not yet written to fd
  std::uint32_t credit = kWindow;  // how much more we may send
  std::uint32_t owed = 0;          // credit to return to the agent
  bool local_eof = false;          // fd gave EOF: our EOF frame is queued
  bool remote_eof = false;         // the agent's EOF frame came
  bool shut_wr = false;
  bool started = false;        // the agent has been told of it
  bool remote_closed = false;  // the agent's kClose came: flush, then finish
};

namespace {

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
constexpr std::size_t kAgentLogLimit = 4096;
// Reads of the stream per wake-up: an agent that streams without pause
// must not keep the link's lock from callers.
constexpr int kReadsPerWake = 4;
// Answers queued for one waiter that nobody takes: an honest agent sends a
// handful per request.
constexpr std::size_t kMaxWaiterQueue = 64;

void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

}  // namespace

AgentLink::Waiter::Waiter() : event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

bool AgentLink::Waiter::push(AgentControl m) {
  std::lock_guard l(mu_);
  if (queue_.size() >= kMaxWaiterQueue) return false;
  queue_.push_back(std::move(m));
  const std::uint64_t one = 1;
  (void)!::write(event_.get(), &one, sizeof one);
  return true;
}

void AgentLink::Waiter::kill() {
  std::lock_guard l(mu_);
  dead_ = true;
  const std::uint64_t one = 1;
  (void)!::write(event_.get(), &one, sizeof one);
}

std::optional<AgentControl> AgentLink::Waiter::pop() {
  std::lock_guard l(mu_);
  if (queue_.empty()) {
    if (!dead_) {
      std::uint64_t v = 0;
      (void)!::read(event_.get(), &v, sizeof v);
    }
    return std::nullopt;
  }
  AgentControl m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

bool AgentLink::Waiter::dead() const {
  std::lock_guard l(mu_);
  return dead_ && queue_.empty();
}

Result<std::unique_ptr<AgentLink>> AgentLink::start(UniqueFd stream, std::string buffered,
                                                    const Options& options) {
  std::unique_ptr<AgentLink> link(new AgentLink());
  link->stream_ = std::move(stream);
  link->options_ = options;
  link->wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!link->wake_) return Error::from_errno("eventfd for the agent link");
  set_nonblocking(link->stream_.get());
  if (options.engine_framed) {
    AgentLink* raw = link.get();
    link->demux_ = std::make_unique<StreamDemuxer>(
        [raw](StreamId id, std::string_view bytes) -> Status {
          if (id == StreamId::kStderr) {
            spdlog::debug("agent {}: {}", raw->options_.name,
                          bytes.substr(0, std::min(bytes.size(), kAgentLogLimit)));
            return ok_status();
          }
          if (!raw->feed_agent_bytes(bytes))
            return Error::make(ErrorCode::kInternal, raw->end_reason_);
          return ok_status();
        },
        kMaxFrameFromAgent + kFrameHeader + 1024);
  }
  // The hello, on this thread: a stream that does not start with one is not
  // an agent of ours.
  auto deadline = std::chrono::steady_clock::now() + options.hello_timeout;
  std::string pending = std::move(buffered);
  while (link->agent_pid_ == 0 && link->alive()) {
    if (!pending.empty()) {
      std::string bytes = std::move(pending);
      pending.clear();
      if (link->demux_) {
        if (auto st = link->demux_->feed(bytes); !st.ok() && link->alive())
          link->die("malformed engine stream: " + st.error().message());
      } else if (!link->feed_agent_bytes(bytes)) {
        break;
      }
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      link->die("no hello from the agent within " + std::to_string(options.hello_timeout.count()) +
                " ms");
      break;
    }
    struct pollfd p {
      link->stream_.get(), POLLIN, 0
    };
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    if (!link->read_stream()) break;
  }
  if (!link->alive() || link->agent_pid_ == 0)
    return Error::make(ErrorCode::kUnavailable,
                       "agent " + options.name + ": " + link->end_reason());
  AgentLink* raw = link.get();
  link->thread_ = std::thread([raw] { raw->run(); });
  return link;
}

AgentLink::~AgentLink() {
  close();
}

std::string AgentLink::end_reason() const {
  std::lock_guard l(mu_);
  return end_reason_;
}

void AgentLink::wake() {
  const std::uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

Status AgentLink::attach(std::uint32_t channel, UniqueFd local) {
  set_nonblocking(local.get());
  std::lock_guard l(mu_);
  if (!alive())
    return Error::make(ErrorCode::kUnavailable, "agent " + options_.name + ": " + end_reason_);
  if (channels_.size() >= kMaxChannels)
    return Error::make(
        ErrorCode::kResourceExhausted,
        "agent " + options_.name + ": " + std::to_string(kMaxChannels) + " channels open at once");
  auto c = std::make_unique<Channel>();
  c->fd = std::move(local);
  channels_[channel] = std::move(c);
  wake();
  return ok_status();
}

Result<std::pair<std::uint32_t, UniqueFd>> AgentLink::open_channel() {
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0)
    return Error::from_errno("socketpair for an agent channel");
  UniqueFd ours(sp[0]), theirs(sp[1]);
  const std::uint32_t id = next_id();
  if (auto st = attach(id, std::move(ours)); !st.ok()) return st.take_error();
  return std::make_pair(id, std::move(theirs));
}

std::shared_ptr<AgentLink::Waiter> AgentLink::watch(std::uint32_t id) {
  auto w = std::make_shared<Waiter>();
  std::lock_guard l(mu_);
  if (!alive()) w->kill();
  waiters_[id] = w;
  return w;
}

void AgentLink::unwatch(std::uint32_t id) {
  std::lock_guard l(mu_);
  waiters_.erase(id);
  accepts_.erase(id);
}

void AgentLink::unwatch_answers(std::uint32_t id) {
  std::lock_guard l(mu_);
  waiters_.erase(id);
}

void AgentLink::on_accept(std::uint32_t id, AcceptHandler handler) {
  std::lock_guard l(mu_);
  accepts_[id] = std::move(handler);
}

Status AgentLink::send_control(const std::string& payload,
                               std::initializer_list<std::uint32_t> starts) {
  if (payload.size() > kMaxFrameToAgent)
    return Error::make(ErrorCode::kInvalidArgument,
                       "agent request too large (argv and environment)");
  std::lock_guard l(mu_);
  if (!alive())
    return Error::make(ErrorCode::kUnavailable, "agent " + options_.name + ": " + end_reason_);
  queue_frame(kControlChannel, payload);
  for (std::uint32_t ch : starts)
    if (auto it = channels_.find(ch); it != channels_.end()) it->second->started = true;
  wake();
  return ok_status();
}

void AgentLink::queue_frame(std::uint32_t channel, std::string_view payload) {
  out_ += encode_frame(channel, payload);
}

void AgentLink::close() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  if (wake_) wake();
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  std::lock_guard l(mu_);
  if (alive()) {
    alive_.store(false, std::memory_order_release);
    end_reason_ = "closed";
  }
  channels_.clear();
  for (auto& [id, w] : waiters_) w->kill();
  waiters_.clear();
  stream_.reset();
}

void AgentLink::die(std::string why) {
  // With mu_ held (or before the relay thread exists): end_reason_ is read
  // under it; the rest is released in run()'s exit.
  if (!alive_.exchange(false, std::memory_order_acq_rel)) return;
  end_reason_ = std::move(why);
  spdlog::debug("agent {}: link ended: {}", options_.name, end_reason_);
}

bool AgentLink::feed_agent_bytes(std::string_view bytes) {
  frame_buf_.append(bytes);
  std::size_t at = 0;
  while (frame_buf_.size() - at >= kFrameHeader) {
    char head[kFrameHeader];
    std::copy_n(frame_buf_.data() + at, kFrameHeader, head);
    FrameHeader h = decode_frame_header(head);
    if (h.length > kMaxFrameFromAgent) {
      die("agent frame of " + std::to_string(h.length) + " bytes (limit " +
          std::to_string(kMaxFrameFromAgent) + ")");
      return false;
    }
    if (frame_buf_.size() - at - kFrameHeader < h.length) break;
    if (!on_frame(h.channel, std::string_view(frame_buf_).substr(at + kFrameHeader, h.length)))
      return false;
    at += kFrameHeader + h.length;
  }
  frame_buf_.erase(0, at);
  return true;
}

bool AgentLink::on_frame(std::uint32_t channel, std::string_view payload) {
  if (channel == kControlChannel) return on_control(payload);
  auto it = channels_.find(channel);
  if (it == channels_.end()) return true;  // closed on our side already
  Channel& c = *it->second;
  if (c.remote_eof || c.to_local.size() + payload.size() > kWindow) {
    die("agent overran channel " + std::to_string(channel));
    return false;
  }
  if (payload.empty())
    c.remote_eof = true;
  else
    c.to_local.append(payload);
  return true;
}

bool AgentLink::on_control(std::string_view payload) {
  auto m = decode_control(payload);
  if (!m) {
    die("malformed control message from the agent");
    return false;
  }
  std::uint32_t id = m->a;
  switch (m->kind) {
    case AgentMsg::kHello:
      if (m->a != kAgentProtocolVersion || m->b == 0 || agent_pid_ != 0) {
        die("agent speaks protocol " + std::to_string(m->a) + ", not " +
            std::to_string(kAgentProtocolVersion));
        return false;
      }
      agent_pid_ = m->b;
      return true;
    case AgentMsg::kCredit: {
      auto it = channels_.find(m->a);
      if (it == channels_.end()) return true;
      if (std::uint64_t{it->second->credit} + m->b > kWindow) {
        die("agent gave more credit than the window");
        return false;
      }
      it->second->credit += m->b;
      return true;
    }
    case AgentMsg::kClose: {
      // What the agent sent before its close is still delivered.
      if (auto it = channels_.find(m->a); it != channels_.end()) {
        it->second->remote_closed = true;
        it->second->remote_eof = true;
      }
      return true;
    }
    case AgentMsg::kAccepted: {
      const std::uint32_t ch = m->b;
      if (ch < kAgentChannelBase || channels_.count(ch)) {
        die("agent announced a connection on channel " + std::to_string(ch) +
            ", which is not its to pick");
        return false;
      }
      if (channels_.size() >= kMaxChannels) {
        queue_frame(kControlChannel, encode_close(ch));
        return true;
      }
      auto h = accepts_.find(m->a);
      UniqueFd fd = h == accepts_.end() ? UniqueFd() : h->second();
      if (!fd) {
        queue_frame(kControlChannel, encode_close(ch));
        return true;
      }
      set_nonblocking(fd.get());
      auto c = std::make_unique<Channel>();
      c->fd = std::move(fd);
      c->started = true;
      channels_[ch] = std::move(c);
      return true;
    }
    case AgentMsg::kStarted:
    case AgentMsg::kUsage:
    case AgentMsg::kListening: break;
    case AgentMsg::kDone: id = m->done->id; break;
    case AgentMsg::kExecFailed: id = m->failure->id; break;
    default: die("agent sent a server's message"); return false;
  }
  if (auto w = waiters_.find(id); w != waiters_.end() && !w->second->push(std::move(*m))) {
    die("agent sent more answers to request " + std::to_string(id) + " than anyone asked for");
    return false;
  }
  return true;
}

bool AgentLink::read_stream() {
  char buf[kReadChunk];
  for (int reads = 0; reads < kReadsPerWake; ++reads) {
    ssize_t n = ::read(stream_.get(), buf, sizeof buf);
    if (n > 0) {
      std::string_view bytes(buf, static_cast<std::size_t>(n));
      if (demux_) {
        if (auto st = demux_->feed(bytes); !st.ok()) {
          if (alive()) die("malformed engine stream: " + st.error().message());
          return false;
        }
      } else if (!feed_agent_bytes(bytes)) {
        return false;
      }
      if (static_cast<std::size_t>(n) < sizeof buf) return true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    die(n == 0 ? "the agent's stream ended (container stopped or removed?)"
               : std::string("reading the agent's stream: ") + errno_text(errno));
    return false;
  }
  return true;
}

bool AgentLink::write_stream() {
  while (!out_.empty()) {
    ssize_t n = ::send(stream_.get(), out_.data(), out_.size(), MSG_NOSIGNAL);
    if (n > 0) {
      out_.erase(0, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    die(std::string("writing to the agent's stream: ") + errno_text(errno));
    return false;
  }
  return true;
}

void AgentLink::finish_channel(std::uint32_t id, Channel& c) {
  c.fd.reset();
  if (!c.remote_closed) queue_frame(kControlChannel, encode_close(id));
}

void AgentLink::drop(std::uint32_t channel) {
  std::lock_guard l(mu_);
  auto it = channels_.find(channel);
  if (it == channels_.end() || !it->second->fd) return;
  finish_channel(channel, *it->second);
  wake();
}

void AgentLink::service_channel(std::uint32_t id, Channel& c, short revents) {
  while (!c.to_local.empty()) {
    ssize_t n = ::send(c.fd.get(), c.to_local.data(), c.to_local.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == ENOTSOCK)  // a pipe handed over
      n = ::write(c.fd.get(), c.to_local.data(), c.to_local.size());
    if (n > 0) {
      c.to_local.erase(0, static_cast<std::size_t>(n));
      c.owed += static_cast<std::uint32_t>(n);
      continue;
    }
    if (n < 0 && errno == EAGAIN) break;
    finish_channel(id, c);  // the reader on our side is gone
    return;
  }
  if (c.owed > 0 && (c.owed >= kWindow / 4 || c.to_local.empty()) && out_.size() < kMaxQueued) {
    queue_frame(kControlChannel, encode_credit(id, c.owed));
    c.owed = 0;
  }
  if ((revents & (POLLIN | POLLHUP | POLLERR)) && c.started && !c.local_eof && !c.remote_closed &&
      c.credit > 0 && out_.size() < kMaxQueued) {
    char buf[kMaxDataFrame];
    std::size_t want = std::min<std::size_t>(c.credit, sizeof buf);
    ssize_t n = ::read(c.fd.get(), buf, want);
    if (n > 0) {
      queue_frame(id, std::string_view(buf, static_cast<std::size_t>(n)));
      c.credit -= static_cast<std::uint32_t>(n);
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      c.local_eof = true;
      queue_frame(id, {});
    }
  }
  if (c.remote_eof && c.to_local.empty() && !c.shut_wr) {
    (void)::shutdown(c.fd.get(), SHUT_WR);
    c.shut_wr = true;
  }
  if ((c.local_eof || c.remote_closed) && c.remote_eof && c.to_local.empty()) finish_channel(id, c);
}

void AgentLink::run() {
  std::vector<struct pollfd> fds;
  std::vector<std::uint32_t> ids;
  for (;;) {
    {
      std::lock_guard l(mu_);
      // Channels whose descriptor went are dropped here, once.
      for (auto it = channels_.begin(); it != channels_.end();)
        it = it->second->fd ? std::next(it) : channels_.erase(it);
      if (stopping_ || !alive()) break;
      fds.clear();
      ids.clear();
      fds.push_back({stream_.get(), static_cast<short>(POLLIN | (out_.empty() ? 0 : POLLOUT)), 0});
      fds.push_back({wake_.get(), POLLIN, 0});
      for (auto& [id, c] : channels_) {
        short ev = 0;
        if (c->started && !c->local_eof && !c->remote_closed && c->credit > 0 &&
            out_.size() < kMaxQueued)
          ev |= POLLIN;
        if (!c->to_local.empty()) ev |= POLLOUT;
        // Work without waiting: credit to return, a half close to pass on.
        bool due = c->owed > 0 || (c->remote_eof && c->to_local.empty() && !c->shut_wr);
        if (ev == 0 && !due) continue;
        fds.push_back({c->fd.get(), due ? static_cast<short>(ev | POLLOUT) : ev, 0});
        ids.push_back(id);
      }
    }
    int r = ::poll(fds.data(), static_cast<nfds_t>(fds.size()), -1);
    if (r < 0 && errno != EINTR) {
      std::lock_guard l(mu_);
      die(std::string("poll: ") + errno_text(errno));
      break;
    }
    std::lock_guard l(mu_);
    if (fds[1].revents) {
      std::uint64_t v = 0;
      (void)!::read(wake_.get(), &v, sizeof v);
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      if (!read_stream()) break;
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto it = channels_.find(ids[i]);
      if (it == channels_.end() || !it->second->fd) continue;
      service_channel(ids[i], *it->second, fds[i + 2].revents);
    }
    if (!out_.empty() && !write_stream()) break;
    // Only replies to what the agent sent can push the queue past its
    // mark (a close per channel, one credit each): an agent that sends but
    // never reads is not given the server's memory.
    if (out_.size() > kMaxQueuedHard) {
      die("the agent does not read what it is sent");
      break;
    }
  }
  std::lock_guard l(mu_);
  if (alive() && stopping_) {
    alive_.store(false, std::memory_order_release);
    end_reason_ = "closed";
  }
  channels_.clear();
  for (auto& [id, w] : waiters_) w->kill();
}

}  // namespace sandcastle::sandbox::engine
