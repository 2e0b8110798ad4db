// tcp_relay: the reference row of bench/net_proxy_bench.mjs. The least a
// user-space hop can cost: accept on 127.0.0.1, connect to the target, and
// copy both ways with blocking read/write of 64 KiB in one thread, nothing
// decided, parsed or counted. The allowlist proxy does the same hop plus its
// policy; the gap between this row and "direct" is what any proxy on this
// machine pays (a second TCP connection's kernel work, one more process
// scheduled on the same cores), the gap between this row and the proxy is
// sandcastle's own.
//
// Usage: tcp_relay --target PORT [--host IPV4]   prints the port it listens on
//        (127.0.0.1), then serves one connection at a time until killed; the
//        target is IPV4:PORT (default 127.0.0.1).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// The target's address: `host` (IPv4, dotted) and `port`.
struct Target {
  in_addr host{htonl(INADDR_LOOPBACK)};
  int port = 0;
};

// Copies what `from` has to `to`; false at its end (or an error).
bool move(int from, int to, std::vector<char>& buf) {
  const ssize_t n = ::read(from, buf.data(), buf.size());
  if (n <= 0) {
    ::shutdown(to, SHUT_WR);
    return false;
  }
  for (ssize_t off = 0; off < n;) {
    const ssize_t m = ::send(to, buf.data() + off, static_cast<std::size_t>(n - off), MSG_NOSIGNAL);
    if (m <= 0) return false;
    off += m;
  }
  return true;
}

// Both ways in one thread, poll(2) and blocking copies: no thread to start
// per connection, so the row is the hop itself.
void serve(int client, const Target& target) {
  const int one = 1;
  const int up = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to = loopback(target.port);
  to.sin_addr = target.host;
  if (up >= 0 && ::connect(up, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) {
    ::setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ::setsockopt(up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> buf(std::size_t{64} * 1024);
    pollfd fds[2] = {{.fd = client, .events = POLLIN, .revents = 0},
                     {.fd = up, .events = POLLIN, .revents = 0}};
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
      if (::poll(fds, 2, -1) <= 0) break;
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || fds[i].revents == 0) continue;
        if (!move(fds[i].fd, fds[1 - i].fd >= 0 ? fds[1 - i].fd : (i == 0 ? up : client), buf))
          fds[i].fd = -1;
      }
    }
  }
  if (up >= 0) ::close(up);
  ::close(client);
}

}  // namespace

int main(int argc, char** argv) {
  Target target;
  bool usage = argc != 3 && argc != 5;
  for (int i = 1; !usage && i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--target") == 0)
      target.port = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--host") != 0 ||
             ::inet_pton(AF_INET, argv[i + 1], &target.host) != 1)
      usage = true;
  }
  if (usage || target.port <= 0 || target.port > 65535) {
    std::fprintf(stderr, "usage: tcp_relay --target PORT [--host IPV4]\n");
    return 2;
  }
  const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a = loopback(0);
  socklen_t len = sizeof a;
  if (l < 0 || ::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 256) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("tcp_relay: listen");
    return 1;
  }
  std::printf("%d\n", ntohs(a.sin_port));
  std::fflush(stdout);
  for (;;) {
    const int c = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) serve(c, target);
  }
}
