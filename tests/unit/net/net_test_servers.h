// Loopback servers for the proxy and resolver tests: a DNS responder (UDP,
// and TCP for truncated answers), a TCP echo server, and socket helpers.
// Everything binds 127.0.0.1 on ephemeral ports; nothing needs privilege.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/unique_fd.h"
#include "net/dns_wire.h"

namespace sandcastle::net::testing {

inline std::uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

inline sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

inline UniqueFd tcp_listener(std::uint16_t& port, std::uint32_t addr = INADDR_LOOPBACK) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback(0);
  a.sin_addr.s_addr = htonl(addr);
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  EXPECT_EQ(::listen(s.get(), 512), 0);
  port = port_of(s.get());
  return s;
}

inline UniqueFd udp_socket(std::uint16_t& port) {
  UniqueFd s(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_in a = loopback(0);
  EXPECT_EQ(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  port = port_of(s.get());
  return s;
}

// Blocking client socket with a receive timeout (so a broken proxy fails
// the test instead of hanging it).
inline UniqueFd dial(std::uint16_t port, int timeout_ms = 5000) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval tv{.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
  ::setsockopt(s.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a = loopback(port);
  if (::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return {};
  return s;
}

inline bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Reads until `until` appears, `max` bytes arrive, EOF or the timeout.
inline std::string read_until(int fd, std::string_view until, std::size_t max = 1 << 20) {
  std::string out;
  char buf[4096];
  while (out.size() < max && (until.empty() || out.find(until) == std::string::npos)) {
    const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, max - out.size()), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

inline std::string read_all(int fd) {
  return read_until(fd, "");
}

// A DNS server for the tests: A records from `names`, NXDOMAIN for other
// names, NODATA for other types; names in `truncate` get TC over UDP and
// the answer over TCP; names ending in `stall_suffix` (if set) are never
// answered. Counts the questions it saw.
class DnsResponder {
 public:
  explicit DnsResponder(std::map<std::string, std::vector<IpAddr>> names,
                        std::vector<std::string> truncate = {}, bool silent = false,
                        std::string stall_suffix = {})
      : names_(std::move(names)),
        truncate_(std::move(truncate)),
        silent_(silent),
        stall_suffix_(std::move(stall_suffix)) {
    // TCP and UDP on one port number: TCP's ephemeral port first (its
    // space is the crowded one), then UDP on the same number.
    for (int attempt = 0; attempt < 20 && !udp_; ++attempt) {
      tcp_ = tcp_listener(port_);
      UniqueFd u(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
      sockaddr_in a = loopback(port_);
      if (::bind(u.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) udp_ = std::move(u);
    }
    EXPECT_TRUE(udp_ && tcp_);
    thread_ = std::thread([this] { loop(); });
  }
  ~DnsResponder() {
    stop_ = true;
    thread_.join();
  }
  std::uint16_t port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  int asked(const std::string& name) {
    std::lock_guard lock(mu_);
    return asked_[name];
  }
  int total() {
    std::lock_guard lock(mu_);
    int n = 0;
    for (auto& [k, v] : asked_) n += v;
    return n;
  }

 private:
  std::vector<std::uint8_t> answer(std::span<const std::uint8_t> wire, bool tcp) {
    auto q = dns::parse(wire);
    if (!q.ok()) return {};
    const std::string name = q->question.name;
    {
      std::lock_guard lock(mu_);
      ++asked_[name];
    }
    if (!stall_suffix_.empty() && name.ends_with(stall_suffix_)) return {};
    auto it = names_.find(name);
    if (it == names_.end()) return dns::build_error(*q, dns::Rcode::kNxDomain);
    if (q->question.qtype != dns::type::kA) return dns::build_nodata(*q);
    if (!tcp && std::find(truncate_.begin(), truncate_.end(), name) != truncate_.end()) {
      auto out = dns::build_nodata(*q);
      out[2] |= 0x02;  // TC
      return out;
    }
    return dns::build_answer(*q, it->second, 300, dns::kMaxMessage, 300);
  }

  void loop() {
    std::vector<std::uint8_t> buf(65536);
    while (!stop_) {
      pollfd p[2] = {{udp_.get(), POLLIN, 0}, {tcp_.get(), POLLIN, 0}};
      if (::poll(p, tcp_ ? 2 : 1, 50) <= 0) continue;
      if (p[0].revents & POLLIN) {
        sockaddr_in from{};
        socklen_t len = sizeof from;
        const ssize_t n = ::recvfrom(udp_.get(), buf.data(), buf.size(), 0,
                                     reinterpret_cast<sockaddr*>(&from), &len);
        if (n <= 0) continue;
        auto out = answer(std::span(buf.data(), static_cast<std::size_t>(n)), false);
        if (!silent_ && !out.empty())
          ::sendto(udp_.get(), out.data(), out.size(), 0, reinterpret_cast<sockaddr*>(&from), len);
      }
      if (tcp_ && (p[1].revents & POLLIN)) {
        UniqueFd c(::accept4(tcp_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        std::string in = read_until(c.get(), "", 2);
        if (in.size() < 2) continue;
        const std::size_t len = (std::size_t{static_cast<unsigned char>(in[0])} << 8) |
                                static_cast<unsigned char>(in[1]);
        std::string body = read_until(c.get(), "", len);
        auto out = answer(
            std::span(reinterpret_cast<const std::uint8_t*>(body.data()), body.size()), true);
        std::string framed{static_cast<char>(out.size() >> 8),
                           static_cast<char>(out.size() & 0xff)};
        framed.append(out.begin(), out.end());
        send_all(c.get(), framed);
      }
    }
  }

  std::map<std::string, std::vector<IpAddr>> names_;
  std::vector<std::string> truncate_;
  bool silent_;
  std::string stall_suffix_;
  std::uint16_t port_ = 0;
  UniqueFd udp_, tcp_;
  std::mutex mu_;
  std::map<std::string, int> asked_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Echoes every connection's bytes back until its EOF.
class EchoServer {
 public:
  EchoServer() {
    listener_ = tcp_listener(port_);
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        std::lock_guard lock(mu_);
        workers_.emplace_back([c] {
          UniqueFd fd(c);
          char buf[16384];
          for (;;) {
            const ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
            if (n <= 0 || !send_all(fd.get(), std::string_view(buf, static_cast<std::size_t>(n))))
              return;
          }
        });
      }
    });
  }
  ~EchoServer() {
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
    std::lock_guard lock(mu_);
    for (auto& w : workers_) w.join();
  }
  std::uint16_t port() const { return port_; }

 private:
  std::uint16_t port_ = 0;
  UniqueFd listener_;
  std::mutex mu_;
  std::vector<std::thread> workers_;
  std::thread thread_;
};

}  // namespace sandcastle::net::testing
