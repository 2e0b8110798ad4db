// ProxyService's insides, shared by its files (proxy_service.cc: the loop,
// attach and accept; relay.cc: deciding, connecting and relaying; the
// protocol front ends http_proxy.cc, socks_proxy.cc, dns_server.cc). All of
// it runs on the service's one loop thread unless a comment says otherwise.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "net/proxy_service.h"
#include "net/resolver.h"
#include "net/session.h"
#include "net/upstream.h"

namespace sandcastle::net::detail {

namespace asio = boost::asio;
using Stream = asio::generic::stream_protocol::socket;
using Acceptor = asio::basic_socket_acceptor<asio::generic::stream_protocol>;
using ErrorCodeT = boost::system::error_code;

constexpr std::size_t kRelayBuffer = std::size_t{64} * 1024;
constexpr std::size_t kPeekMax = std::size_t{16} * 1024;
constexpr std::size_t kLimitedMax = 64;  // over-limit connections answered per sandbox at once
constexpr auto kHostAddrRefresh = std::chrono::seconds(60);
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);  // after EMFILE and the like

class Conn;

// The loop and what every connection shares.
struct Core {
  explicit Core(ProxyOptions opts) : options(std::move(opts)) {}
  ProxyOptions options;
  std::unique_ptr<Resolver> resolver;

  // The host's addresses; read from any thread.
  mutable std::mutex hosts_mu;
  std::shared_ptr<const std::vector<IpAddr>> hosts = std::make_shared<std::vector<IpAddr>>();
  std::shared_ptr<const std::vector<IpAddr>> host_addrs() const {
    std::lock_guard lock(hosts_mu);
    return hosts;
  }

  // Connections per session (loop only) and in all (read anywhere).
  std::map<const Session*, std::size_t> per_session;
  std::map<const Session*, std::size_t> limited;
  std::atomic<std::size_t> total{0};
  // Whether the loop thread still runs handlers, so a close posted from
  // another thread will run (changed and read under post_mu).
  std::mutex post_mu;
  bool loop_running = false;
  // Last, so it goes first: the connections its pending handlers still
  // hold are destroyed while the rest of Core is alive.
  // One thread runs it (the hint spares the scheduler's locking).
  asio::io_context io{1};
};

// One attach(): its listeners and connections.
struct AttachState : std::enable_shared_from_this<AttachState> {
  Core* core = nullptr;
  std::weak_ptr<Core> core_ref;  // for close functions called from other threads
  std::shared_ptr<Session> session;
  std::unique_ptr<Acceptor> http, socks, dns_tcp;
  std::unique_ptr<asio::ip::udp::socket> dns_udp;
  asio::ip::udp::endpoint dns_peer;
  std::array<std::uint8_t, 65536> dns_buf{};
  std::map<Conn*, std::weak_ptr<Conn>> conns;
  bool closed = false;
  // DNS queries in the current second.
  std::chrono::steady_clock::time_point dns_window{};
  int dns_in_window = 0;

  void close_all();
};

// What open_target() ended in.
enum class Outcome : std::uint8_t {
  kOpen,         // connected (through the host's proxy when routed)
  kRefused,      // the policy said no (reason set, already recorded)
  kNoName,       // the name did not resolve
  kUnreachable,  // connecting failed
  kTimeout,      // connecting took longer than connect_timeout
  kUpstream,     // the host's proxy refused (message set)
};

// A client connection and, once decided, its upstream.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(std::shared_ptr<AttachState> att, Stream client, bool limited);
  virtual ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  virtual void start() = 0;
  void close();

 protected:
  struct Target {
    Via via = Via::kConnect;
    std::string host;  // lower case, IPv6 without brackets
    std::uint16_t port = 0;
    bool tunnel = true;  // CONNECT/SOCKS (vs a forwarded plain request)
  };
  using Opened = std::function<void(Outcome, Reason, const std::string& message)>;
  // Decides, resolves once, connects to the exact address allowed (or to the
  // host's proxy); registers the tunnel with the session.
  void open_target(Target target, Opened done);
  // After the client's success reply: relays both ways. With `peek`, the
  // client's first bytes (<= 16 KiB, head timeout) are checked first: a TLS
  // server name or an HTTP Host must be one of `names` (if any).
  void relay(std::string to_upstream, std::string to_client, bool peek);
  // Writes `data` to the client, then closes.
  void reply_and_close(std::string data);
  // Reads the client until `enough` says the bytes suffice (head timeout).
  void read_client(std::size_t max, std::function<bool(const std::string&)> enough,
                   std::function<void()> done);
  void arm_head_timer();

  bool via_proxy() const { return via_ != nullptr; }
  // The one line Session::record_failure keeps for a failed connection.
  std::string failure_text(Outcome outcome, const std::string& message) const;
  // The client's message for an outcome other than kOpen.
  static std::string outcome_text(Outcome outcome, Reason reason, const std::string& target,
                                  const std::string& message);

  Core& core() { return *att_->core; }
  Session& session() { return *att_->session; }
  std::string target_text() const;

  std::shared_ptr<AttachState> att_;
  Stream client_;
  Stream upstream_;
  asio::steady_timer timer_;
  bool limited_ = false;
  bool closed_ = false;
  std::string in_;  // bytes read from the client, not yet used
  Target target_{};
  std::optional<std::string> name_;  // the name the decision used
  std::vector<std::string> names_;   // names a TLS SNI / Host may carry
  std::optional<IpAddr> addr_;
  std::string early_;  // bytes the host's proxy sent after its CONNECT reply

 private:
  enum class Peek : std::uint8_t { kMore, kPass, kBadSni, kBadHost };
  void resolved(Result<Resolved> r, Opened done);
  void decided(std::vector<IpAddr> allowed, Opened done);
  void arm_connect_timer();
  void connect_next(std::vector<IpAddr> addrs, std::size_t i, std::uint16_t port, Opened done);
  void connect_via_proxy(Opened done);
  void proxy_handshake(Opened done);
  void read_proxy_reply(Opened done);
  void established(Opened done);
  Peek peek_check();
  void peek_more();
  void peek_pass();
  void refuse_in_tunnel(std::string reply);
  void drain();
  void pump(bool to_upstream);
  void touch();
  void arm_idle();

  std::uint64_t tunnel_id_ = 0;
  bool timed_out_ = false;
  bool finishing_ = false;  // a final reply is being written: the relay stops
  std::string last_error_;
  std::string peek_name_;  // the SNI or Host a refusal names
  std::shared_ptr<asio::ip::tcp::resolver> proxy_lookup_;
  const UpstreamProxy* via_ = nullptr;
  std::uint64_t generation_ = 0;  // the session's policy generation when decided
  std::array<std::vector<std::uint8_t>, 2> bufs_{};
  std::array<bool, 2> done_{};
  std::string peek_;
  std::array<char, 1024> sink_{};  // what a refused client still sends
  std::chrono::steady_clock::time_point last_active_{};
};

// The front ends (http_proxy.cc, socks_proxy.cc, dns_server.cc).
std::shared_ptr<Conn> make_http_conn(std::shared_ptr<AttachState> att, Stream s, bool limited);
std::shared_ptr<Conn> make_socks_conn(std::shared_ptr<AttachState> att, Stream s, bool limited);
std::shared_ptr<Conn> make_dns_tcp_conn(std::shared_ptr<AttachState> att, Stream s, bool limited);
void serve_dns_udp(const std::shared_ptr<AttachState>& att);
// One DNS query from the sandbox; `reply` gets the answer (maybe later,
// maybe never for garbage).
void answer_dns(const std::shared_ptr<AttachState>& att, std::span<const std::uint8_t> query,
                bool tcp, std::function<void(std::vector<std::uint8_t>)> reply);

}  // namespace sandcastle::net::detail
