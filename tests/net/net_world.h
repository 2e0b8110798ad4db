// The net_tests world (design of issue 19, §8): the test process's own
// network namespace holds a bridge `sctbr` (198.51.100.1/24, fd00:5c::1/64)
// with veth pairs to four named namespaces, each running a server:
//
//   sct<pid>-a    198.51.100.2   HTTP :80 (/big: 1 MiB, /host: the Host
//                                header), HTTPS :443 (allowed.test,
//                                x.allowed.test, signed by ca_cert()),
//                                TCP echo :7000
//   sct<pid>-b    198.51.100.3   HTTP :80, the neighbour
//   sct<pid>-dns  198.51.100.53  DNS over UDP and TCP :53 (world/dns_server.py)
//   sct<pid>-v6   fd00:5c::2     HTTP :80
//
// main() enters private net and mount namespaces before any thread starts
// (enter_private_namespaces), so nothing here touches the host's network or
// its /run/netns; the named namespaces live on a tmpfs of this process's
// mount namespace. A default route via 198.51.100.254 (nobody) gives pasta
// an uplink; nothing beyond the bridge is reachable.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "net/address.h"

namespace sandcastle::nettest {

class NetWorld {
 public:
  static constexpr const char* kBridge = "sctbr";
  static constexpr const char* kBridgeAddr = "198.51.100.1";
  static constexpr const char* kServerA = "198.51.100.2";
  static constexpr const char* kServerB = "198.51.100.3";
  static constexpr const char* kDnsAddr = "198.51.100.53";
  static constexpr const char* kResolver = "198.51.100.53:53";
  static constexpr const char* kServerV6 = "fd00:5c::2";
  static constexpr const char* kGateway = "198.51.100.254";  // routed to, never answered
  static constexpr std::uint16_t kEchoPort = 7000;
  static constexpr std::size_t kBigBody = std::size_t{1} << 20;

  // Run by main() before any thread exists: records the host's addresses,
  // opens a listener on the host's 127.0.0.1 (so tests can prove it is out
  // of reach), then unshares net and mount namespaces, makes every mount
  // private and puts a tmpfs on /run/netns. Needs root and `ip`; the error
  // says which is missing.
  static Status enter_private_namespaces();
  // Builds the world in the namespaces entered above; `source_dir` holds
  // tests/net/world/. Waits for each server's "ready" line and one connect.
  static Result<std::unique_ptr<NetWorld>> build(const std::string& source_dir);

  // The world main() built, or nullptr with skip_reason() saying why.
  static NetWorld* get();
  static const std::string& skip_reason();
  // `broken`: root and the tools were there but the world failed to build,
  // so the tests fail (with `reason`) instead of skipping.
  static void set_global(std::unique_ptr<NetWorld> world, std::string reason, bool broken);
  static bool broken();
  static void reset_global();

  ~NetWorld();  // kills the servers, deletes the namespaces and the bridge
  NetWorld(const NetWorld&) = delete;
  NetWorld& operator=(const NetWorld&) = delete;

  // "sct<pid>-a" for "a", and so on.
  std::string ns_name(const std::string& role) const;
  // PEM of the CA that signed the HTTPS server's certificate.
  const std::string& ca_cert() const { return ca_cert_; }
  // A port listening on the host's 127.0.0.1 (accepting nothing), 0 if none.
  static std::uint16_t host_loopback_port();
  // The host's interface addresses, measured before leaving its netns.
  static const std::vector<net::IpAddr>& host_addrs();

 private:
  NetWorld() = default;
  Status setup(const std::string& source_dir);
  Status start_server(const std::string& role, const std::vector<std::string>& args,
                      const char* addr, std::uint16_t port);
  void teardown();

  std::string prefix_;   // "sct<pid>"
  std::string tmp_dir_;  // certificates
  std::string ca_cert_;
  std::vector<std::string> namespaces_;
  std::vector<pid_t> servers_;
  bool bridge_ = false;
};

// In a test body: skips, naming the cause, when this machine cannot build
// the world (no root, no `ip`); fails when it should have and did not.
#define REQUIRE_NET_WORLD()                                             \
  do {                                                                  \
    if (::sandcastle::nettest::NetWorld::get() == nullptr) {            \
      if (::sandcastle::nettest::NetWorld::broken())                    \
        GTEST_FAIL() << ::sandcastle::nettest::NetWorld::skip_reason(); \
      GTEST_SKIP() << ::sandcastle::nettest::NetWorld::skip_reason();   \
    }                                                                   \
  } while (0)

// Small helpers the net tests share.
// Connects (TCP) to addr:port within `timeout_ms`; 0 or the errno (ETIMEDOUT
// when the deadline passed).
int tcp_connect_errno(const std::string& addr, std::uint16_t port, int timeout_ms = 3000);
// Runs argv (PATH lookup), stdin from /dev/null; exit status and output.
struct CommandResult {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
Result<CommandResult> run_command(const std::vector<std::string>& argv);
// A plain HTTP/1.0 GET to addr:port (IPv4 or IPv6 literal) with `host` as
// the Host header: the status code and the body.
struct HttpReply {
  int status = 0;
  std::string body;
};
Result<HttpReply> http_get(const std::string& addr, std::uint16_t port, const std::string& path,
                           const std::string& host);

}  // namespace sandcastle::nettest
