#include "net_world.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "common/unique_fd.h"
#include "sandbox/native/net.h"

namespace sandcastle::nettest {
namespace {

std::unique_ptr<NetWorld> g_world;
// The reason the world is missing (a function's static: no throwing global).
std::string& skip_text() {
  static std::string text = "the net_tests world was not built (main() did not run setup)";
  return text;
}
bool g_broken = false;
std::uint16_t g_host_port = 0;
UniqueFd g_host_listener;
std::vector<net::IpAddr> g_host_addrs;

bool on_path(const std::string& tool) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "/usr/sbin:/usr/bin:/sbin:/bin";
  dirs += ":/usr/sbin:/sbin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + tool;
    if (::access(candidate.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::string python() {
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  out.reserve(argv.size() + 1);
  for (const auto& a : argv) out.push_back(const_cast<char*>(a.c_str()));
  out.push_back(nullptr);
  return out;
}

Status ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_command(argv);
  if (!r) return r.take_error();
  if (r->status == 0) return {};
  std::string what = "ip";
  for (const auto& a : args) what += " " + a;
  return Error::make(ErrorCode::kIo, what + ": " + r->err);
}

// Reads one line from `fd` within `timeout_ms`.
Result<std::string> read_line(int fd, int timeout_ms) {
  std::string line;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) return Error::make(ErrorCode::kTimeout, "no ready line");
    pollfd p{fd, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(left));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) continue;
    char c = 0;
    ssize_t n = ::read(fd, &c, 1);
    if (n <= 0) return Error::make(ErrorCode::kUnavailable, "server exited before ready");
    if (c == '\n') return line;
    line.push_back(c);
  }
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  f.close();
  if (!f) return Error::make(ErrorCode::kIo, "write " + path);
  return {};
}

}  // namespace

Result<CommandResult> run_command(const std::vector<std::string>& argv) {
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return Error::from_errno("pipe");
  }
  UniqueFd out_rd(out_pipe[0]), out_wr(out_pipe[1]), err_rd(err_pipe[0]), err_wr(err_pipe[1]);
  auto args = c_argv(argv);
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork");
  if (pid == 0) {
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_wr.get(), 1);
    ::dup2(err_wr.get(), 2);
    ::execvp(args[0], args.data());
    _exit(127);
  }
  out_wr.reset();
  err_wr.reset();
  CommandResult r;
  // Both pipes at once: a child filling stderr must not block on it while
  // we wait on stdout.
  std::array<pollfd, 2> fds{pollfd{out_rd.get(), POLLIN, 0}, pollfd{err_rd.get(), POLLIN, 0}};
  std::array<std::string*, 2> sinks{&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (std::size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[4096];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n > 0) {
        sinks[i]->append(buf, static_cast<std::size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

namespace {

// A connected TCP socket (blocking again once connected), or the errno.
std::pair<UniqueFd, int> tcp_connect(const std::string& addr, std::uint16_t port, int timeout_ms) {
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, addr.c_str(), &sin->sin_addr) == 1) {
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    len = sizeof *sin;
  } else if (::inet_pton(AF_INET6, addr.c_str(), &sin6->sin6_addr) == 1) {
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    len = sizeof *sin6;
  } else {
    return {UniqueFd(), EINVAL};
  }
  UniqueFd fd(::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return {UniqueFd(), errno};
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    if (errno != EINPROGRESS) return {UniqueFd(), errno};
    pollfd p{fd.get(), POLLOUT, 0};
    int rc = 0;
    while ((rc = ::poll(&p, 1, timeout_ms)) < 0 && errno == EINTR) {
    }
    if (rc == 0) return {UniqueFd(), ETIMEDOUT};
    int err = 0;
    socklen_t elen = sizeof err;
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err != 0) return {UniqueFd(), err};
  }
  ::fcntl(fd.get(), F_SETFL, 0);
  return {std::move(fd), 0};
}

}  // namespace

int tcp_connect_errno(const std::string& addr, std::uint16_t port, int timeout_ms) {
  return tcp_connect(addr, port, timeout_ms).second;
}

Result<HttpReply> http_get(const std::string& addr, std::uint16_t port, const std::string& path,
                           const std::string& host) {
  auto [fd, err] = tcp_connect(addr, port, 5000);
  if (err != 0) return Error::from_errno("connect " + addr, err);
  timeval tv{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const std::string req = "GET " + path + " HTTP/1.0\r\nHost: " + host + "\r\n\r\n";
  if (::send(fd.get(), req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size()))
    return Error::from_errno("send");
  std::string all;
  char buf[65536];
  for (;;) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("recv");
    if (n == 0) break;
    all.append(buf, static_cast<std::size_t>(n));
  }
  const auto head_end = all.find("\r\n\r\n");
  if (all.rfind("HTTP/1.", 0) != 0 || head_end == std::string::npos || all.size() < 12)
    return Error::make(ErrorCode::kIo, "not an HTTP reply: " + all.substr(0, 80));
  HttpReply r;
  r.status = static_cast<int>(std::strtol(all.substr(9, 3).c_str(), nullptr, 10));
  r.body = all.substr(head_end + 4);
  return r;
}

Status NetWorld::enter_private_namespaces() {
  if (::geteuid() != 0)
    return Error::make(ErrorCode::kPermissionDenied, "net_tests needs root (uid " +
                                                         std::to_string(::geteuid()) +
                                                         "): it builds bridges and namespaces");
  for (const char* tool : {"ip", "openssl"})
    if (!on_path(tool))
      return Error::make(ErrorCode::kNotFound,
                         std::string("net_tests needs `") + tool + "` (iproute2/openssl)");
  if (::access(python().c_str(), X_OK) != 0 && !on_path("python3"))
    return Error::make(ErrorCode::kNotFound, "net_tests needs python3 for the world's servers");
  if (auto addrs = net::host_addresses()) g_host_addrs = std::move(*addrs);
  // A listener of the host's, kept open: the tests prove it unreachable.
  UniqueFd l(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sin;
  if (l && ::bind(l.get(), reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0 &&
      ::listen(l.get(), 1) == 0 &&
      ::getsockname(l.get(), reinterpret_cast<sockaddr*>(&sin), &len) == 0) {
    g_host_port = ntohs(sin.sin_port);
    g_host_listener = std::move(l);
  }
  if (::unshare(CLONE_NEWNET | CLONE_NEWNS) != 0)
    return Error::from_errno("unshare(CLONE_NEWNET|CLONE_NEWNS)");
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return Error::from_errno("make mounts private");
  // Not nodev: a test binds a device node from here (full_mode_test.cc).
  ::mkdir("/run/netns", 0755);
  if (::mount("sctnetns", "/run/netns", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=755") != 0)
    return Error::from_errno("mount tmpfs on /run/netns");
  if (auto e = sandbox::native::bring_loopback_up())
    return Error::from_errno("bring lo up: " + e->step, e->err);
  return {};
}

Result<std::unique_ptr<NetWorld>> NetWorld::build(const std::string& source_dir) {
  std::unique_ptr<NetWorld> w(new NetWorld());
  w->prefix_ = "sct" + std::to_string(::getpid());
  if (auto s = w->setup(source_dir); !s) return s.take_error();
  return w;
}

std::string NetWorld::ns_name(const std::string& role) const {
  return prefix_ + "-" + role;
}

Status NetWorld::setup(const std::string& source_dir) {
  std::string tmpl = "/tmp/" + prefix_ + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return Error::from_errno("mkdtemp");
  tmp_dir_ = tmpl;
  // CA and leaf (EC keys: fast to make).
  const std::string ca_key = tmp_dir_ + "/ca.key", leaf_key = tmp_dir_ + "/leaf.key";
  const std::string leaf_csr = tmp_dir_ + "/leaf.csr", leaf = tmp_dir_ + "/leaf.pem";
  const std::string ext = tmp_dir_ + "/leaf.ext";
  ca_cert_ = tmp_dir_ + "/ca.pem";
  if (auto s = write_file(ext,
                          "subjectAltName=DNS:allowed.test,DNS:x.allowed.test\n"
                          "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
      !s)
    return s;
  const std::vector<std::vector<std::string>> openssl = {
      {"openssl",
       "req",
       "-x509",
       "-newkey",
       "ec",
       "-pkeyopt",
       "ec_paramgen_curve:prime256v1",
       "-nodes",
       "-keyout",
       ca_key,
       "-out",
       ca_cert_,
       "-days",
       "2",
       "-subj",
       "/CN=sandcastle net_tests CA",
       "-addext",
       "basicConstraints=critical,CA:TRUE",
       "-addext",
       "keyUsage=critical,keyCertSign,cRLSign"},
      {"openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
       "-keyout", leaf_key, "-out", leaf_csr, "-subj", "/CN=allowed.test"},
      {"openssl", "x509", "-req", "-in", leaf_csr, "-CA", ca_cert_, "-CAkey", ca_key,
       "-CAcreateserial", "-days", "2", "-out", leaf, "-extfile", ext},
  };
  for (const auto& argv : openssl) {
    auto r = run_command(argv);
    if (!r) return r.take_error();
    if (r->status != 0) return Error::make(ErrorCode::kIo, "openssl " + argv[1] + ": " + r->err);
  }

  bridge_ = true;
  const std::vector<std::vector<std::string>> bridge = {
      {"link", "add", kBridge, "type", "bridge", "forward_delay", "0"},
      {"addr", "add", std::string(kBridgeAddr) + "/24", "dev", kBridge},
      {"addr", "add", "fd00:5c::1/64", "dev", kBridge, "nodad"},
      {"link", "set", kBridge, "up"},
      {"route", "add", "default", "via", kGateway},
  };
  for (const auto& args : bridge)
    if (auto s = ip(args); !s) return s;

  struct Peer {
    const char* role;
    std::string addr;
    bool v6;
  };
  const std::vector<Peer> peers = {{"a", std::string(kServerA) + "/24", false},
                                   {"b", std::string(kServerB) + "/24", false},
                                   {"dns", std::string(kDnsAddr) + "/24", false},
                                   {"v6", std::string(kServerV6) + "/64", true}};
  for (const Peer& p : peers) {
    const std::string ns = ns_name(p.role), veth = std::string("sctv-") + p.role;
    if (auto s = ip({"netns", "add", ns}); !s) return s;
    namespaces_.push_back(ns);
    std::vector<std::vector<std::string>> cmds = {
        {"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
        {"link", "set", veth, "master", kBridge, "up"},
        {"-n", ns, "link", "set", "lo", "up"},
        {"-n", ns, "link", "set", "eth0", "up"},
    };
    if (p.v6)
      cmds.push_back({"-n", ns, "addr", "add", p.addr, "dev", "eth0", "nodad"});
    else
      cmds.push_back({"-n", ns, "addr", "add", p.addr, "dev", "eth0"});
    for (const auto& args : cmds)
      if (auto s = ip(args); !s) return s;
  }

  const std::string world = source_dir + "/tests/net/world/";
  const std::string servers = world + "servers.py";
  if (auto s = start_server("a", {servers, "a", kServerA, leaf, leaf_key}, kServerA, 443); !s)
    return s;
  if (auto s = start_server("b", {servers, "b", kServerB}, kServerB, 80); !s) return s;
  if (auto s = start_server("dns", {world + "dns_server.py", kDnsAddr}, kDnsAddr, 53); !s) return s;
  if (auto s = start_server("v6", {servers, "v6", kServerV6}, kServerV6, 80); !s) return s;
  return {};
}

Status NetWorld::start_server(const std::string& role, const std::vector<std::string>& args,
                              const char* addr, std::uint16_t port) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  UniqueFd rd(p[0]), wr(p[1]);
  std::vector<std::string> argv{"ip", "netns", "exec", ns_name(role), python()};
  argv.insert(argv.end(), args.begin(), args.end());
  auto cargs = c_argv(argv);
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork");
  if (pid == 0) {
    // The servers die with this process, however it ends.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(wr.get(), 1);
    ::execvp(cargs[0], cargs.data());
    _exit(127);
  }
  servers_.push_back(pid);
  wr.reset();
  auto line = read_line(rd.get(), 15000);
  if (!line || *line != "ready")
    return Error::make(ErrorCode::kUnavailable, "server " + role + " did not start: " +
                                                    (line ? *line : line.error().message()));
  int err = tcp_connect_errno(addr, port, 5000);
  if (err != 0)
    return Error::from_errno(
        "connect to server " + role + " at " + addr + ":" + std::to_string(port), err);
  return {};
}

void NetWorld::teardown() {
  for (pid_t pid : servers_) ::kill(pid, SIGKILL);
  for (pid_t pid : servers_) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  servers_.clear();
  for (const auto& ns : namespaces_) (void)ip({"netns", "del", ns});
  namespaces_.clear();
  if (bridge_) (void)ip({"link", "del", kBridge});
  bridge_ = false;
  if (!tmp_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(tmp_dir_, ec);
  }
}

NetWorld::~NetWorld() {
  try {
    teardown();
  } catch (
      ...) {  // NOLINT(bugprone-empty-catch): a failed `ip` at exit leaves the world to die with us
  }
}

NetWorld* NetWorld::get() {
  return g_world.get();
}

const std::string& NetWorld::skip_reason() {
  return skip_text();
}

void NetWorld::set_global(std::unique_ptr<NetWorld> world, std::string reason, bool broken) {
  g_world = std::move(world);
  skip_text() = std::move(reason);
  g_broken = broken;
}

bool NetWorld::broken() {
  return g_broken;
}

void NetWorld::reset_global() {
  g_world.reset();
}

std::uint16_t NetWorld::host_loopback_port() {
  return g_host_port;
}

const std::vector<net::IpAddr>& NetWorld::host_addrs() {
  return g_host_addrs;
}

}  // namespace sandcastle::nettest
