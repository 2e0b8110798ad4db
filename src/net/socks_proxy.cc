// The SOCKS5 front end (:1080): no authentication, CONNECT only, to a
// domain name or an IPv4/IPv6 address (RFC 1928).
#include <boost/asio/write.hpp>

#include "net/proxy_internal.h"

namespace sandcastle::net::detail {
namespace {

namespace rep {
constexpr std::uint8_t kOk = 0x00;
constexpr std::uint8_t kFailure = 0x01;
constexpr std::uint8_t kNotAllowed = 0x02;
constexpr std::uint8_t kHostUnreachable = 0x04;
constexpr std::uint8_t kRefused = 0x05;
constexpr std::uint8_t kCommand = 0x07;
constexpr std::uint8_t kAddressType = 0x08;
}  // namespace rep

std::string reply_bytes(std::uint8_t code) {
  // BND.ADDR 0.0.0.0:0: clients of CONNECT do not use it.
  return std::string{0x05, static_cast<char>(code), 0x00, 0x01, 0, 0, 0, 0, 0, 0};
}

// The request's size once its fixed part is in (0: not yet known).
std::size_t request_size(const std::string& in) {
  if (in.size() < 5) return 0;
  switch (in[3]) {
    case 0x01: return 4 + 4 + 2;
    case 0x03: return 4 + 1 + static_cast<unsigned char>(in[4]) + 2;
    case 0x04: return 4 + 16 + 2;
    default: return 4;  // answered with kAddressType
  }
}

class SocksConn final : public Conn {
 public:
  using Conn::Conn;

  void start() override {
    arm_head_timer();
    read_client(
        2 + 255,
        [](const std::string& in) {
          return in.size() >= 2 && in.size() >= std::size_t{2} + static_cast<unsigned char>(in[1]);
        },
        [this, self = shared_from_this()] { on_greeting(); });
  }

 private:
  void on_greeting() {
    if (in_[0] != 0x05) return close();
    const std::size_t n = static_cast<unsigned char>(in_[1]);
    const bool no_auth = in_.substr(2, n).find('\0') != std::string::npos;
    in_.erase(0, 2 + n);
    if (!no_auth) return reply_and_close(std::string{0x05, static_cast<char>(0xff)});
    write(std::string{0x05, 0x00}, [this] {
      read_client(
          4 + 1 + 255 + 2,
          [](const std::string& in) {
            const std::size_t want = request_size(in);
            return want != 0 && in.size() >= want;
          },
          [this, self = shared_from_this()] { on_request(); });
    });
  }

  void on_request() {
    if (in_[0] != 0x05) return close();
    const std::uint8_t cmd = static_cast<std::uint8_t>(in_[1]);
    const std::uint8_t atyp = static_cast<std::uint8_t>(in_[3]);
    if (atyp != 0x01 && atyp != 0x03 && atyp != 0x04)
      return reply_and_close(reply_bytes(rep::kAddressType));
    const std::size_t size = request_size(in_);
    Target t{.via = Via::kSocks, .host = "", .port = 0, .tunnel = true};
    const auto* b = reinterpret_cast<const std::uint8_t*>(in_.data());
    if (atyp == 0x01) {
      t.host = IpAddr::v4({b[4], b[5], b[6], b[7]}).to_string();
    } else if (atyp == 0x04) {
      std::array<std::uint8_t, 16> v6{};
      std::copy(b + 4, b + 20, v6.begin());
      t.host = IpAddr::v6(v6).to_string();
    } else {
      t.host = in_.substr(5, b[4]);
      for (auto& c : t.host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    t.port = static_cast<std::uint16_t>((b[size - 2] << 8) | b[size - 1]);
    in_.erase(0, size);
    target_ = t;
    if (cmd != 0x01) {
      session().record_refusal(Via::kSocks, target_text(), "", t.port, Reason::kUnsupported);
      return reply_and_close(reply_bytes(rep::kCommand));
    }
    if (limited_) {
      session().record_refusal(Via::kSocks, target_text(), "", t.port, Reason::kLimit);
      return reply_and_close(reply_bytes(rep::kFailure));
    }
    open_target(std::move(t),
                [this, self = shared_from_this()](Outcome o, Reason, const std::string&) {
                  switch (o) {
                    case Outcome::kOpen: return relay("", reply_bytes(rep::kOk), true);
                    case Outcome::kRefused: return reply_and_close(reply_bytes(rep::kNotAllowed));
                    case Outcome::kNoName:
                    case Outcome::kTimeout:
                      return reply_and_close(reply_bytes(rep::kHostUnreachable));
                    case Outcome::kUnreachable: return reply_and_close(reply_bytes(rep::kRefused));
                    case Outcome::kUpstream: return reply_and_close(reply_bytes(rep::kFailure));
                  }
                });
  }

  void write(std::string data, std::function<void()> next) {
    auto msg = std::make_shared<std::string>(std::move(data));
    asio::async_write(client_, asio::buffer(*msg),
                      [this, self = shared_from_this(), msg, next = std::move(next)](
                          const ErrorCodeT& ec, std::size_t) {
                        if (ec || closed_) return close();
                        next();
                      });
  }
};

}  // namespace

std::shared_ptr<Conn> make_socks_conn(std::shared_ptr<AttachState> att, Stream s, bool limited) {
  return std::make_shared<SocksConn>(std::move(att), std::move(s), limited);
}

}  // namespace sandcastle::net::detail
