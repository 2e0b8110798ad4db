#include "sandbox/engine/agent/sandbox_listeners.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace sandcastle::sandbox::engine::agent {
namespace {

// A DNS query the server has not answered by then is dropped; the client
// retries on its own (glibc: 5 s, twice).
constexpr std::int64_t kFlowTimeoutMs = 10'000;
constexpr std::size_t kMaxDnsMessage = 65535;
// Channels the sandbox's connections leave free: code in the sandbox that
// holds a thousand connections open must not stop the server from running
// commands or reading files there.
constexpr std::size_t kReservedChannels = 128;

std::int64_t clock_ms() {
  struct timespec ts {};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

// 127.0.0.1:port, no SO_REUSEADDR or SO_REUSEPORT: nothing else in the
// container (the same uid) may bind the port beside it.
UniqueFd bind_loopback(int type, std::uint16_t port, const char*& step) {
  step = "socket";
  UniqueFd fd(::socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  struct sockaddr_in addr {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  step = "bind";
  if (::bind(fd.get(), reinterpret_cast<struct sockaddr*>(&addr), sizeof addr) != 0)
    return UniqueFd();
  step = "listen";
  if (type == SOCK_STREAM && ::listen(fd.get(), kListenBacklog) != 0) return UniqueFd();
  return fd;
}

std::uint16_t bound_port(int fd) {
  struct sockaddr_in addr {};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&addr), &len) != 0) return 0;
  return ntohs(addr.sin_port);
}

}  // namespace

bool SandboxListeners::has_id(std::uint32_t id) const {
  return std::any_of(listeners_.begin(), listeners_.end(),
                     [id](const Listener& l) { return l.id == id; });
}

const char* SandboxListeners::listen(std::uint32_t id, ListenKind kind, std::uint16_t port) {
  if (has_id(id)) return "listen: the id is in use";
  const char* step = "";
  auto fail = [&] {
    ch_.control(encode_failure(AgentFailure{id, errno, step}));
    return nullptr;
  };
  UniqueFd tcp = bind_loopback(SOCK_STREAM, port, step);
  if (!tcp) return fail();
  // Port 0 (tests): the UDP socket takes the port TCP got.
  const std::uint16_t got = bound_port(tcp.get());
  UniqueFd udp;
  if (kind == ListenKind::kDns && !(udp = bind_loopback(SOCK_DGRAM, got, step))) return fail();
  listeners_.push_back(Listener{id, false, std::move(tcp)});
  if (udp) listeners_.push_back(Listener{id, true, std::move(udp)});
  ch_.control(encode_listening(id, got));
  return nullptr;
}

bool SandboxListeners::take_channel(std::uint32_t& id) {
  if (ch_.size() >= kMaxChannels - kReservedChannels || next_channel_ == 0) return false;
  id = next_channel_++;
  return true;
}

void SandboxListeners::accept_on(const Listener& l) {
  for (;;) {
    UniqueFd conn(::accept4(l.fd.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!conn) return;
    std::uint32_t ch = 0;
    if (!take_channel(ch)) continue;  // closed: its client sees EOF
    ch_.add(ch, ChannelKind::kSocket, std::move(conn), std::nullopt);
    ch_.control(encode_accepted(l.id, ch));
  }
}

void SandboxListeners::receive_on(const Listener& l) {
  std::string buf(2 + kMaxDnsMessage, '\0');
  for (;;) {
    Flow f;
    socklen_t len = sizeof f.source;
    ssize_t n = ::recvfrom(l.fd.get(), buf.data() + 2, kMaxDnsMessage, MSG_TRUNC,
                           reinterpret_cast<struct sockaddr*>(&f.source), &len);
    if (n < 0) return;
    std::uint32_t ch = 0;
    // Beyond the cap (or a datagram that did not fit) it is dropped: DNS
    // clients retry, and a flood gets no more than kMaxDnsFlows channels.
    if (n == 0 || static_cast<std::size_t>(n) > kMaxDnsMessage || len != sizeof f.source ||
        flows_.size() >= kMaxDnsFlows || !take_channel(ch))
      continue;
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sp) != 0) {
      --next_channel_;
      continue;
    }
    f.ours = UniqueFd(sp[0]);
    UniqueFd theirs(sp[1]);
    buf[0] = static_cast<char>((n >> 8) & 0xff);
    buf[1] = static_cast<char>(n & 0xff);
    // An empty socket buffer takes one message whole.
    const auto framed = static_cast<std::size_t>(n) + 2;
    if (::write(f.ours.get(), buf.data(), framed) != static_cast<ssize_t>(framed)) {
      --next_channel_;
      continue;
    }
    f.listener = l.id;
    f.udp_fd = l.fd.get();
    f.deadline = clock_ms() + kFlowTimeoutMs;
    ch_.add(ch, ChannelKind::kSocket, std::move(theirs), std::nullopt);
    ch_.control(encode_accepted(l.id, ch));
    flows_.push_back(std::move(f));
  }
}

bool SandboxListeners::read_reply(Flow& f) {
  char buf[16 * 1024];
  for (;;) {
    ssize_t n = ::read(f.ours.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n <= 0) return false;  // the server ended the channel without an answer
    f.reply.append(buf, static_cast<std::size_t>(n));
    if (f.reply.size() < 2) continue;
    const std::size_t len =
        (static_cast<std::size_t>(static_cast<unsigned char>(f.reply[0])) << 8) |
        static_cast<unsigned char>(f.reply[1]);
    if (f.reply.size() < 2 + len) continue;
    // The first message answers the query; the channel is done with it.
    (void)::sendto(f.udp_fd, f.reply.data() + 2, len, MSG_DONTWAIT,
                   reinterpret_cast<const struct sockaddr*>(&f.source), sizeof f.source);
    return false;
  }
}

void SandboxListeners::poll_set(std::vector<struct pollfd>& pfds) {
  for (const Listener& l : listeners_) pfds.push_back({l.fd.get(), POLLIN, 0});
  for (const Flow& f : flows_) pfds.push_back({f.ours.get(), POLLIN, 0});
  polled_listeners_ = listeners_.size();
  polled_flows_ = flows_.size();
}

void SandboxListeners::on_ready(const struct pollfd* pfds, std::size_t n) {
  if (n != polled_listeners_ + polled_flows_) return;
  // Flows first: receive_on appends to flows_, which would shift nothing
  // polled but must not be read before it was polled.
  std::vector<bool> done(polled_flows_, false);
  for (std::size_t i = 0; i < polled_flows_; ++i)
    if (pfds[polled_listeners_ + i].revents) done[i] = !read_reply(flows_[i]);
  for (std::size_t i = polled_flows_; i-- > 0;)
    if (done[i]) flows_.erase(flows_.begin() + static_cast<std::ptrdiff_t>(i));
  for (std::size_t i = 0; i < polled_listeners_; ++i) {
    if (!pfds[i].revents) continue;
    if (listeners_[i].udp)
      receive_on(listeners_[i]);
    else
      accept_on(listeners_[i]);
  }
}

void SandboxListeners::expire(std::int64_t now_ms) {
  flows_.erase(std::remove_if(flows_.begin(), flows_.end(),
                              [now_ms](const Flow& f) { return now_ms >= f.deadline; }),
               flows_.end());
}

std::int64_t SandboxListeners::next_deadline() const {
  std::int64_t next = 0;
  for (const Flow& f : flows_)
    if (next == 0 || f.deadline < next) next = f.deadline;
  return next;
}

}  // namespace sandcastle::sandbox::engine::agent
