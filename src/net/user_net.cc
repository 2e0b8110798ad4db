#include "net/user_net.h"

#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "net/nft.h"

namespace sandcastle::net {
namespace {

constexpr int kFdNetns = 3;  // pasta's --netns /proc/self/fd/3
constexpr int kFdUserns = 4;

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

// Async-signal-safe: whether /proc/self/net/route (this task's netns) has a
// line whose destination is 00000000 (a default route).
bool has_default_route() {
  int fd = ::open("/proc/self/net/route", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[8192];
  std::size_t len = 0;
  ssize_t n;
  while (len < sizeof buf - 1 && (n = ::read(fd, buf + len, sizeof buf - 1 - len)) > 0)
    len += static_cast<std::size_t>(n);
  ::close(fd);
  // Each line after the header: "iface\tDESTINATION\t...".
  std::size_t i = 0;
  while (i < len && buf[i] != '\n') ++i;  // header
  while (i < len) {
    ++i;
    std::size_t tab = i;
    while (tab < len && buf[tab] != '\t' && buf[tab] != '\n') ++tab;
    if (tab + 9 < len && buf[tab] == '\t' && std::memcmp(buf + tab + 1, "00000000\t", 9) == 0)
      return true;
    while (i < len && buf[i] != '\n') ++i;
  }
  return false;
}

// The probe, in a forked child: exit 0 when the route appears, 1 on
// timeout, 2+ when a step fails.
[[noreturn]] void probe_child(int netns_fd, int userns_fd, int timeout_ms) {
  if (userns_fd >= 0 && ::setns(userns_fd, CLONE_NEWUSER) != 0) _exit(2);
  if (::setns(netns_fd, CLONE_NEWNET) != 0) _exit(3);
  int nl = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
  if (nl < 0) _exit(4);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_ROUTE;
  if (::bind(nl, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) _exit(5);
  // Subscribed first, read second: a route added in between still wakes us.
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    if (has_default_route()) _exit(0);
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    const long elapsed =
        (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (elapsed >= timeout_ms) _exit(1);
    pollfd p{nl, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_ms - elapsed)) > 0) {
      char drain[8192];
      while (::recv(nl, drain, sizeof drain, MSG_DONTWAIT) > 0) {
      }
    }
  }
}

Status probe_status(int status) {
  if (WIFEXITED(status)) {
    switch (WEXITSTATUS(status)) {
      case 0: return {};
      case 1:
        return Error::make(ErrorCode::kTimeout, "no default route in the sandbox's namespace");
      case 2: return Error::make(ErrorCode::kSystem, "route probe: setns into the user namespace");
      case 3: return Error::make(ErrorCode::kSystem, "route probe: setns into the net namespace");
      default: return Error::make(ErrorCode::kSystem, "route probe: netlink socket");
    }
  }
  return Error::make(ErrorCode::kInternal, "route probe killed");
}

}  // namespace

Result<std::pair<UserNetTool, std::string>> UserNet::find_tool(UserNetTool tool) {
  const std::pair<UserNetTool, const char*> tools[] = {{UserNetTool::kPasta, "pasta"},
                                                       {UserNetTool::kSlirp4netns, "slirp4netns"}};
  for (const auto& [kind, name] : tools) {
    if (tool != UserNetTool::kAuto && tool != kind) continue;
    for (const char* dir : {"/usr/bin/", "/usr/sbin/", "/bin/", "/usr/local/bin/"}) {
      std::string path = std::string(dir) + name;
      if (::access(path.c_str(), X_OK) == 0) return std::pair{kind, path};
    }
  }
  if (tool == UserNetTool::kSlirp4netns)
    return Error::make(ErrorCode::kUnavailable, "slirp4netns is not installed");
  return Error::make(ErrorCode::kUnavailable,
                     "full mode needs the Debian package passt (pasta), or slirp4netns");
}

Status UserNet::available() {
  auto tool = find_tool(UserNetTool::kAuto);
  if (!tool) return tool.take_error();
  int fd = ::open("/dev/net/tun", O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    return Error{
        ErrorCode::kUnavailable, err,
        "/dev/net/tun is not accessible to uid " + std::to_string(::geteuid()) +
            " (full mode's pasta or slirp4netns needs it read-write; it is often 0600 root)"};
  }
  ::close(fd);
  return {};
}

Status full_mode_available() {
  if (auto s = UserNet::available(); !s) return s;
  if (auto nft = nft::nft_binary(); !nft) return nft.take_error();
  return {};
}

Status wait_default_route(int netns_fd, int userns_fd, std::chrono::milliseconds timeout,
                          int watch_fd) {
  int done[2];
  if (::pipe2(done, O_CLOEXEC) != 0) return Error::from_errno("pipe");
  UniqueFd done_rd(done[0]), done_wr(done[1]);
  const int ms = static_cast<int>(timeout.count());
  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork");
  if (pid == 0) probe_child(netns_fd, userns_fd, ms);  // done_wr closes at its exit
  done_wr.reset();
  // Wait for the probe to end (EOF on the pipe) or the watched fd.
  pollfd fds[2] = {{done_rd.get(), POLLIN, 0}, {watch_fd, POLLIN, 0}};
  bool watched = false;
  bool ended = false;
  for (;;) {
    int rc = ::poll(fds, watch_fd >= 0 ? 2 : 1, ms + 1000);
    if (rc < 0 && errno == EINTR) continue;
    ended = rc > 0 && fds[0].revents != 0;
    watched = rc > 0 && watch_fd >= 0 && (fds[1].revents & POLLIN) != 0;
    break;
  }
  // The watched process exited, or the probe outlived its own deadline.
  if (!ended) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (watched) return Error::make(ErrorCode::kCancelled, "the watched process exited");
  if (!ended) return Error::make(ErrorCode::kTimeout, "the route probe did not finish");
  return probe_status(status);
}

namespace {

std::vector<std::string> tool_args(UserNetTool tool, bool root) {
  const std::string netns = "/proc/self/fd/" + std::to_string(kFdNetns);
  const std::string userns = "/proc/self/fd/" + std::to_string(kFdUserns);
  if (tool == UserNetTool::kSlirp4netns) {
    std::vector<std::string> args = {"slirp4netns",   "--configure",
                                     "--mtu=65520",   "--disable-host-loopback",
                                     "--disable-dns", "--enable-seccomp"};
    // Its mount-namespace sandbox needs root (it calls setegid(0) and fails
    // otherwise; rootless podman runs it inside a user namespace of its
    // own): an unprivileged server gets the seccomp filter only.
    if (root) args.emplace_back("--enable-sandbox");
    args.insert(args.end(), {"--netns-type=path", "--userns-path=" + userns, netns, "tap0"});
    return args;
  }
  std::vector<std::string> args = {"pasta",    "-q",          "-f",     "--config-net", "-4",
                                   "-T",       "none",        "-U",     "none",         "-t",
                                   "none",     "-u",          "none",   "--no-map-gw",  "--no-dhcp",
                                   "--no-ndp", "--no-dhcpv6", "--no-ra"};
  // As root, pasta must stay uid 0. This pasta (2023-03) drops to its
  // --runas user (nobody by default) before it joins the user namespace,
  // and setns() into a namespace root owns needs CAP_SYS_ADMIN there: "Couldn't
  // enter user namespace: Operation not permitted" (with --netns-only,
  // "Couldn't switch to pasta namespaces"). Started inside the sandbox's user
  // namespace instead, it cannot open /dev/net/tun (0600 root): "Failed to
  // open tun socket in namespace". Measured 2026-11.
  if (root) args.insert(args.end(), {"--runas", "0"});
  args.insert(args.end(), {"--netns", netns, "--userns", userns});
  return args;
}

const char* tool_name(UserNetTool tool) {
  return tool == UserNetTool::kSlirp4netns ? "slirp4netns" : "pasta";
}

}  // namespace

Result<std::unique_ptr<UserNet>> UserNet::start(int netns_fd, int userns_fd, bool root,
                                                UserNetTool which) {
  auto found = find_tool(which);
  if (!found) return found.take_error();
  const auto [tool, path] = *found;
  // Copies above the fixed numbers, so the child's dup2s cannot collide.
  UniqueFd netns(::fcntl(netns_fd, F_DUPFD_CLOEXEC, 10));
  UniqueFd userns(::fcntl(userns_fd, F_DUPFD_CLOEXEC, 10));
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!netns || !userns || !devnull) return Error::from_errno("prepare the tool's fds");
  // The tool's stderr is a memfd, not a pipe: a message written after we
  // stopped reading (slirp4netns warns once it runs) must neither block it
  // nor kill it with SIGPIPE.
  UniqueFd log(::memfd_create("sandcastle-usernet-stderr", MFD_CLOEXEC));
  if (!log) return Error::from_errno("memfd_create");

  std::vector<std::string> args = tool_args(tool, root);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  char env0[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char* envp[] = {env0, nullptr};

  pid_t pid = ::fork();
  if (pid < 0) return Error::from_errno("fork");
  if (pid == 0) {
    // dup2 clears close-on-exec on the copies pasta needs.
    if (::dup2(devnull.get(), 0) < 0 || ::dup2(devnull.get(), 1) < 0 || ::dup2(log.get(), 2) < 0 ||
        ::dup2(netns.get(), kFdNetns) < 0 || ::dup2(userns.get(), kFdUserns) < 0)
      _exit(127);
    ::execve(path.c_str(), argv.data(), envp);
    _exit(127);
  }
  UniqueFd pidfd(pidfd_open(pid));
  if (!pidfd) {
    const int e = errno;
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Error::from_errno(std::string("pidfd_open ") + tool_name(tool), e);
  }
  std::unique_ptr<UserNet> net(new UserNet(tool, pid, std::move(pidfd)));
  Status ready = wait_default_route(netns_fd, userns_fd, kReadyTimeout, net->pidfd());
  if (ready) return net;
  // Not ready: stop the tool, then read what it said, if anything.
  net.reset();
  std::string said(4096, '\0');
  ssize_t n = ::pread(log.get(), said.data(), said.size(), 0);
  said.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
  while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
  Error e = ready.take_error();
  e.context = tool_name(tool) + (": " + e.context) + (said.empty() ? "" : ": " + said);
  return e;
}

bool UserNet::running() const {
  pollfd p{pidfd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

std::string UserNet::exit_text() const {
  siginfo_t info{};
  // WNOWAIT: the destructor still reaps it.
  if (::waitid(static_cast<idtype_t>(3) /* P_PIDFD */, static_cast<id_t>(pidfd_.get()), &info,
               WEXITED | WNOHANG | WNOWAIT) != 0 ||
      info.si_pid == 0)
    return "";
  const bool exited = info.si_code == CLD_EXITED;
  return std::string(tool_name(tool_)) + " exited (" + (exited ? "status " : "signal ") +
         std::to_string(info.si_status) + ")";
}

UserNet::~UserNet() {
  if (!pidfd_) return;
  ::syscall(SYS_pidfd_send_signal, pidfd_.get(), SIGKILL, nullptr, 0);
  siginfo_t info{};
  while (::waitid(static_cast<idtype_t>(3) /* P_PIDFD */, static_cast<id_t>(pidfd_.get()), &info,
                  WEXITED) < 0 &&
         errno == EINTR) {
  }
}

}  // namespace sandcastle::net
