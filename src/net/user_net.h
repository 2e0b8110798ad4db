// Full mode's user-mode network stack: pasta (Debian `passt`) joins the
// sandbox's network namespace and carries its traffic out through ordinary
// sockets of the server's namespace. Nothing is forwarded inward (-t/-u
// none) and the sandbox cannot reach the server's loopback (-T/-U none) or
// the host through the gateway address (--no-map-gw). Without pasta,
// slirp4netns does the same (--disable-host-loopback, --disable-dns, its
// own sandbox and seccomp filter), on 10.0.2.100/24.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "common/result.h"
#include "common/unique_fd.h"

namespace sandcastle::net {

enum class UserNetTool : std::uint8_t {
  kAuto,  // pasta when installed, else slirp4netns
  kPasta,
  kSlirp4netns,
};

class UserNet {
 public:
  // How long start() waits for the sandbox's default route.
  static constexpr std::chrono::milliseconds kReadyTimeout{2000};

  // OK when pasta or slirp4netns is installed and /dev/net/tun opens
  // read-write for this process; otherwise kUnavailable saying which ("full
  // mode needs the Debian package passt", "/dev/net/tun is not accessible
  // to uid ...").
  static Status available();
  // The tool kAuto picks and its path, or the error above.
  static Result<std::pair<UserNetTool, std::string>> find_tool(UserNetTool tool);

  // Starts pasta for the namespace `netns_fd`, entered through the user
  // namespace `userns_fd` that owns it; `root`: the server runs as root,
  // and pasta must stay uid 0 (--runas 0) to enter that user namespace
  // (user_net.cc says why it cannot drop root).
  // Returns once the namespace has a default route (at most kReadyTimeout);
  // if pasta exits first, the error carries its stderr.
  // `root` does not matter to slirp4netns.
  static Result<std::unique_ptr<UserNet>> start(int netns_fd, int userns_fd, bool root,
                                                UserNetTool tool = UserNetTool::kAuto);

  // Kills pasta (SIGKILL through the pidfd) and reaps it.
  ~UserNet();
  UserNet(const UserNet&) = delete;
  UserNet& operator=(const UserNet&) = delete;

  UserNetTool tool() const { return tool_; }
  pid_t pid() const { return pid_; }
  int pidfd() const { return pidfd_.get(); }
  // False once pasta has exited (it is not reaped here).
  bool running() const;
  // Once it has exited: "pasta exited (status N)" or "pasta exited (signal
  // N)"; "" while it runs.
  std::string exit_text() const;

 private:
  UserNet(UserNetTool tool, pid_t pid, UniqueFd pidfd)
      : tool_(tool), pid_(pid), pidfd_(std::move(pidfd)) {}
  UserNetTool tool_ = UserNetTool::kPasta;
  pid_t pid_ = -1;
  UniqueFd pidfd_;
};

// Whether full mode can run here: UserNet::available() (pasta or
// slirp4netns, and /dev/net/tun), then nft for its firewall. kUnavailable
// names what is missing.
Status full_mode_available();

// Whether the namespace `netns_fd` (entered through `userns_fd`, or not
// when -1) gets an IPv4 default route within `timeout`: a forked probe
// enters it, subscribes to route changes over netlink and reads
// /proc/self/net/route, so it waits on events, not a polling loop. When
// `watch_fd` (e.g. a pidfd) becomes readable first, the wait ends with
// kCancelled.
Status wait_default_route(int netns_fd, int userns_fd, std::chrono::milliseconds timeout,
                          int watch_fd = -1);

}  // namespace sandcastle::net
