// The HTTP proxy front end (:3128): CONNECT host:port, and absolute-form
// http:// requests whose Host is the URL's authority.
#include <algorithm>
#include <cctype>
#include <string_view>

#include "net/http_head.h"
#include "net/proxy_internal.h"

namespace sandcastle::net::detail {
namespace {

bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return std::isalnum(u) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

class HttpConn final : public Conn {
 public:
  using Conn::Conn;

  void start() override {
    arm_head_timer();
    read_client(
        kMaxHead, [](const std::string& in) { return in.find("\r\n\r\n") != std::string::npos; },
        [this, self = shared_from_this()] { on_head(); });
  }

 private:
  void on_head() {
    auto head = parse_head(in_);
    // The method must be a token (RFC 9110 tchar): "GET\thttp://10.0.0.5/\tx"
    // would otherwise be one "method" here and two words to a lenient parser.
    if (!head || head->method.empty() ||
        !std::all_of(head->method.begin(), head->method.end(), is_tchar))
      return reply_and_close(plain_reply("400 Bad Request", "sandcastle: bad request\n"));
    in_.erase(0, head->size);
    if (head->method == "CONNECT") return on_connect(*head);
    return on_plain(*head);
  }

  bool over_limit(Via via) {
    if (!limited_) return false;
    session().record_refusal(via, target_text(), "", target_.port, Reason::kLimit);
    reply_and_close(plain_reply("503 Service Unavailable",
                                "sandcastle: " + target_text() + " refused (limit)\n"));
    return true;
  }

  void on_connect(const RequestHead& head) {
    Target t{.via = Via::kConnect, .host = "", .port = 0, .tunnel = true};
    if (!split_host_port(head.target, 443, t.host, t.port))
      return reply_and_close(plain_reply("400 Bad Request", "sandcastle: bad CONNECT target\n"));
    target_ = t;
    if (over_limit(Via::kConnect)) return;
    open_target(std::move(t),
                [this, self = shared_from_this()](Outcome o, Reason r, const std::string& msg) {
                  if (o == Outcome::kOpen)
                    return relay("", "HTTP/1.1 200 Connection established\r\n\r\n", true);
                  fail(o, r, msg);
                });
  }

  void on_plain(const RequestHead& head) {
    if (ascii_lower(head.target.substr(0, 7)) != "http://")
      return reply_and_close(plain_reply(
          "400 Bad Request", "sandcastle: this proxy takes CONNECT and http:// requests\n"));
    auto url = rule_from_url(head.target);
    if (!url.ok())
      return reply_and_close(plain_reply("400 Bad Request", "sandcastle: bad request URL\n"));
    Target t{.via = Via::kHttp, .host = url->host, .port = url->port, .tunnel = false};
    target_ = t;
    if (auto host = header_value(head.fields, "host")) {
      std::string h;
      std::uint16_t p = 0;
      if (!split_host_port(*host, 80, h, p) || h != t.host || p != t.port) {
        session().record_refusal(Via::kHttp, *host, "", t.port, Reason::kHostMismatch);
        return reply_and_close(plain_reply(
            "403 Forbidden", "sandcastle: Host " + *host + " is not the request's target " +
                                 target_text() + " (host_mismatch)\n"));
      }
    }
    if (over_limit(Via::kHttp)) return;
    open_target(std::move(t), [this, self = shared_from_this(), head](Outcome o, Reason r,
                                                                      const std::string& msg) {
      if (o != Outcome::kOpen) return fail(o, r, msg);
      // Origin form, also through the host's proxy: the request travels in a
      // tunnel to the decided address (proxy_handshake), so nothing but the
      // target decided on is named to anyone.
      std::string forward =
          forward_head(head.method + " " + path_of(head.target) + " " + head.version, head.fields);
      relay(std::move(forward), "", false);
    });
  }

  static std::string path_of(const std::string& target) {
    const auto path_start = target.find('/', target.find("://") + 3);
    return path_start == std::string::npos ? "/" : target.substr(path_start);
  }

  void fail(Outcome o, Reason r, const std::string& msg) {
    const char* status = o == Outcome::kRefused   ? "403 Forbidden"
                         : o == Outcome::kTimeout ? "504 Gateway Timeout"
                                                  : "502 Bad Gateway";
    reply_and_close(plain_reply(status, outcome_text(o, r, target_text(), msg) + "\n"));
  }
};

}  // namespace

std::shared_ptr<Conn> make_http_conn(std::shared_ptr<AttachState> att, Stream s, bool limited) {
  return std::make_shared<HttpConn>(std::move(att), std::move(s), limited);
}

}  // namespace sandcastle::net::detail
