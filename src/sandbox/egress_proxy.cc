#include "sandbox/egress_proxy.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "net/http_head.h"

namespace sandcastle::sandbox {

namespace {

using net::authority;
using net::forward_head;
using net::lower;
using net::plain_reply;
using net::split_host_port;

// Waits for `fd` to become readable, or the wake fd; false on timeout/stop.
bool wait_readable(int fd, int wake, int timeout_ms) {
  pollfd p[2] = {{fd, POLLIN, 0}, {wake, POLLIN, 0}};
  int n = ::poll(p, 2, timeout_ms);
  return n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !(p[1].revents & POLLIN);
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

UniqueFd connect_to(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return {};
  UniqueFd out;
  for (addrinfo* a = res; a && !out; a = a->ai_next) {
    UniqueFd s(
        ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
    if (!s) continue;
    if (::connect(s.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) continue;
    pollfd p{s.get(), POLLOUT, 0};
    int err = 0;
    socklen_t len = sizeof err;
    if (::poll(&p, 1, timeout_ms) == 1 &&
        getsockopt(s.get(), SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
      int flags = fcntl(s.get(), F_GETFL);
      fcntl(s.get(), F_SETFL, flags & ~O_NONBLOCK);
      out = std::move(s);
    }
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace

EgressProxy::EgressProxy(UniqueFd listener, std::vector<EgressRule> allow, EgressLimits limits,
                         UpstreamProxies upstream)
    : listener_(std::move(listener)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      allow_(std::move(allow)),
      limits_(limits),
      upstream_(std::move(upstream)) {
  acceptor_ = std::thread([this] { accept_loop(); });
}

EgressProxy::~EgressProxy() {
  stop();
}

void EgressProxy::stop() {
  if (stopping_.exchange(true)) {
    if (acceptor_.joinable()) acceptor_.join();
    return;
  }
  uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  if (acceptor_.joinable()) acceptor_.join();
  std::vector<std::thread> workers;
  {
    std::lock_guard lock(mu_);
    workers.swap(workers_);
  }
  for (auto& t : workers) t.join();
  listener_.reset();
}

bool EgressProxy::permits(const std::string& host, uint16_t port) const {
  const std::string h = lower(host);
  return std::any_of(allow_.begin(), allow_.end(),
                     [&](const EgressRule& r) { return r.host == h && r.port == port; });
}

std::string EgressProxy::last_denied() const {
  std::lock_guard lock(mu_);
  return last_denied_;
}

std::string EgressProxy::last_failure() const {
  std::lock_guard lock(mu_);
  return last_failure_;
}

void EgressProxy::accept_loop() {
  while (!stopping_) {
    pollfd p[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (p[1].revents & POLLIN) break;
    if (!(p[0].revents & POLLIN)) continue;
    UniqueFd client(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!client) continue;
    if (active_.load() >= limits_.max_connections) {
      send_all(
          client.get(),
          "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      continue;
    }
    ++active_;
    std::lock_guard lock(mu_);
    workers_.emplace_back([this, c = std::move(client)]() mutable {
      serve(std::move(c));
      --active_;
    });
  }
}

void EgressProxy::serve(UniqueFd client) {
  // Read the request head (bounded in size and time).
  std::string head;
  char buf[16384];
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.handshake_timeout_ms);
  while (head.find("\r\n\r\n") == std::string::npos) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    deadline - std::chrono::steady_clock::now())
                                    .count());
    if (left <= 0 || head.size() > 16384 || !wait_readable(client.get(), wake_.get(), left)) return;
    ssize_t n = ::recv(client.get(), buf, sizeof buf, 0);
    if (n <= 0) return;
    head.append(buf, static_cast<size_t>(n));
  }
  size_t head_end = head.find("\r\n\r\n") + 4;
  std::string line = head.substr(0, head.find("\r\n"));
  auto sp1 = line.find(' ');
  auto sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 == sp1) return;
  std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string version = line.substr(sp2 + 1);

  std::string host;
  uint16_t port = 0;
  std::string forward;  // bytes to send upstream first (absolute-form requests)
  std::string fields;   // the request's header fields (absolute-form requests)
  bool tunnel = method == "CONNECT";
  if (tunnel) {
    if (!split_host_port(target, 443, host, port)) return;
  } else {
    auto r = rule_from_url(target);
    if (!r.ok() || target.rfind("http://", 0) != 0) {
      send_all(client.get(),
               "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      return;
    }
    host = r->host;
    port = r->port;
    auto path_start = target.find('/', target.find("://") + 3);
    std::string path = path_start == std::string::npos ? "/" : target.substr(path_start);
    const size_t fields_start = line.size() + 2;
    const size_t fields_end = std::max(fields_start, head_end - 2);  // up to the last field's CRLF
    fields = head.substr(fields_start, fields_end - fields_start);
    forward = forward_head(method + " " + path + " " + version, fields) + head.substr(head_end);
  }
  if (!permits(host, port)) {
    ++denied_;
    {
      std::lock_guard lock(mu_);
      last_denied_ = authority(host, port);
    }
    spdlog::warn("egress proxy: denied {} {}:{}", method, host, port);
    std::string body = "sandcastle: network access to " + host + ":" + std::to_string(port) +
                       " is not allowed; only the configured package indexes are reachable\n";
    send_all(client.get(),
             "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: " +
                 std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
    return;
  }
  const UpstreamProxy* via = upstream_.route(tunnel, host);
  UniqueFd upstream = via ? connect_to(via->host, via->port, limits_.handshake_timeout_ms)
                          : connect_to(host, port, limits_.handshake_timeout_ms);
  // A connection that cannot be made: 502 to the installer, and the reason
  // kept for the install's error message (installers do not show the body).
  auto fail = [&](const std::string& why) {
    {
      std::lock_guard lock(mu_);
      last_failure_ = why;
    }
    send_all(client.get(), plain_reply("502 Bad Gateway", "sandcastle: " + why + "\n"));
  };
  if (!upstream) {
    fail("cannot connect to " +
         (via ? "the host's proxy " + authority(via->host, via->port) : authority(host, port)));
    return;
  }
  std::string early;  // bytes the host's proxy sent after its CONNECT reply
  if (via && tunnel) {
    std::string req =
        "CONNECT " + authority(host, port) + " HTTP/1.1\r\nHost: " + authority(host, port) +
        "\r\n" +
        (via->authorization.empty() ? "" : "Proxy-Authorization: " + via->authorization + "\r\n") +
        "\r\n";
    std::string reply;
    if (!send_all(upstream.get(), req)) return;
    deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(limits_.handshake_timeout_ms);
    while (reply.find("\r\n\r\n") == std::string::npos) {
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
      if (left <= 0 || reply.size() > 16384 || !wait_readable(upstream.get(), wake_.get(), left))
        break;
      ssize_t n = ::recv(upstream.get(), buf, sizeof buf, 0);
      if (n <= 0) break;
      reply.append(buf, static_cast<size_t>(n));
    }
    auto end = reply.find("\r\n\r\n");
    std::string status = reply.substr(0, std::min(reply.find("\r\n"), size_t{200}));
    auto sp = status.find(' ');
    if (end == std::string::npos || sp == std::string::npos ||
        status.compare(sp + 1, 1, "2") != 0) {
      for (auto& c : status)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
      fail("the host's proxy " + authority(via->host, via->port) + " refused CONNECT " +
           authority(host, port) + (status.empty() ? "" : " (" + status + ")"));
      return;
    }
    early = reply.substr(end + 4);
  } else if (via) {
    // The host's proxy takes the absolute form, with its own credentials.
    forward = forward_head(line, fields,
                           via->authorization.empty()
                               ? ""
                               : "Proxy-Authorization: " + via->authorization + "\r\n") +
              head.substr(head_end);
  }
  ++allowed_;
  if (tunnel) {
    if (!send_all(client.get(), "HTTP/1.1 200 Connection established\r\n\r\n")) return;
    if (!early.empty() && !send_all(client.get(), early)) return;
    if (head.size() > head_end && !send_all(upstream.get(), head.substr(head_end))) return;
  } else if (!send_all(upstream.get(), forward)) {
    return;
  }
  // Relay both ways until either side closes, idles out, or the proxy stops.
  for (;;) {
    pollfd p[3] = {
        {client.get(), POLLIN, 0}, {upstream.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    int n = ::poll(p, 3, limits_.idle_timeout_ms);
    if (n <= 0 || (p[2].revents & POLLIN)) return;
    for (int i = 0; i < 2; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = ::recv(p[i].fd, buf, sizeof buf, 0);
      if (got <= 0) return;
      if (!send_all(p[1 - i].fd, std::string_view(buf, static_cast<size_t>(got)))) return;
    }
  }
}

}  // namespace sandcastle::sandbox
