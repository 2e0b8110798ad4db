#include "images/registry_http.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <algorithm>
#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cctype>
#include <limits>

#include "common/text.h"

namespace sandcastle::images::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

constexpr std::size_t kErrorBodyLimit = std::size_t{64} * 1024;
constexpr std::uint32_t kHeaderLimit = 64u * 1024u;

Error net_error(const Url& url, const char* what, const error_code& ec) {
  const ErrorCode code =
      ec == beast::error::timeout ? ErrorCode::kTimeout : ErrorCode::kUnavailable;
  return Error::make(code, std::string(what) + " " + url.authority() + ": " + ec.message());
}

// Runs one asynchronous operation to completion on `ioc` (the deadlines of
// beast::tcp_stream only apply to asynchronous operations).
template <typename Start>
error_code run_op(asio::io_context& ioc, Start&& start) {
  error_code result = asio::error::would_block;
  start([&result](error_code ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

}  // namespace

std::string Url::authority() const {
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + port;
}

std::string Url::str() const {
  return (tls ? "https://" : "http://") + authority() + target;
}

Result<Url> parse_url(std::string_view text) {
  Url u;
  std::string_view rest;
  if (text.substr(0, 8) == "https://") {
    rest = text.substr(8);
  } else if (text.substr(0, 7) == "http://") {
    u.tls = false;
    rest = text.substr(7);
  } else {
    return Error::make(ErrorCode::kInvalidArgument,
                       "not an http(s) URL: '" + std::string(text.substr(0, 200)) + "'");
  }
  const auto slash = rest.find_first_of("/?");
  std::string_view auth = rest.substr(0, slash);
  u.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (u.target[0] == '?') u.target = "/" + u.target;
  if (auth.find('@') != std::string_view::npos)
    return Error::make(ErrorCode::kInvalidArgument, "URLs with user information are refused");
  std::string_view port;
  if (!auth.empty() && auth[0] == '[') {
    const auto close = auth.find(']');
    if (close == std::string_view::npos)
      return Error::make(ErrorCode::kInvalidArgument, "bad IPv6 host in URL");
    u.host = std::string(auth.substr(1, close - 1));
    if (close + 1 < auth.size()) {
      if (auth[close + 1] != ':')
        return Error::make(ErrorCode::kInvalidArgument, "bad host in URL");
      port = auth.substr(close + 2);
    }
  } else {
    const auto colon = auth.rfind(':');
    u.host = std::string(auth.substr(0, colon));
    if (colon != std::string_view::npos) port = auth.substr(colon + 1);
  }
  if (u.host.empty() || u.host.size() > 253)
    return Error::make(ErrorCode::kInvalidArgument, "URL without a host");
  for (char c : u.host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
          c == '_'))
      return Error::make(ErrorCode::kInvalidArgument, "bad character in URL host");
  if (port.empty()) {
    u.port = u.tls ? "443" : "80";
  } else {
    if (port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
      return Error::make(ErrorCode::kInvalidArgument, "bad port in URL");
    u.port = std::string(port);
  }
  for (char c : u.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return Error::make(ErrorCode::kInvalidArgument, "bad character in URL path");
  u.host = ascii_lower(u.host);
  return u;
}

Result<Url> resolve_url(const Url& base, std::string_view ref) {
  if (ref.substr(0, 7) == "http://" || ref.substr(0, 8) == "https://") return parse_url(ref);
  if (ref.empty() || ref[0] != '/' || (ref.size() > 1 && ref[1] == '/'))
    return Error::make(ErrorCode::kInvalidArgument,
                       "unsupported relative URL '" + std::string(ref.substr(0, 200)) + "'");
  Url u = base;
  u.target = std::string(ref);
  for (char c : u.target)
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f)
      return Error::make(ErrorCode::kInvalidArgument, "bad character in URL path");
  return u;
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost" || host == "::1") return true;
  error_code ec;
  auto a = asio::ip::make_address(std::string(host), ec);
  return !ec && a.is_loopback();
}

struct Client::Impl {
  ClientSettings settings;
  asio::io_context ioc;
  asio::ssl::context tls{asio::ssl::context::tls_client};
  std::string tls_setup_error;
};

Client::Client(ClientSettings settings) : impl_(std::make_unique<Impl>()) {
  impl_->settings = std::move(settings);
  error_code ec;
  impl_->tls.set_default_verify_paths(ec);
  if (!ec && !impl_->settings.ca_file.empty())
    impl_->tls.load_verify_file(impl_->settings.ca_file, ec);
  if (ec) impl_->tls_setup_error = "loading trusted certificates: " + ec.message();
  impl_->tls.set_verify_mode(asio::ssl::verify_peer);
  SSL_CTX_set_min_proto_version(impl_->tls.native_handle(), TLS1_2_VERSION);
}

Client::~Client() = default;

namespace {

template <typename Stream>
Result<Response> exchange(asio::io_context& ioc, Stream& stream, const Url& url,
                          const std::vector<std::pair<std::string, std::string>>& headers,
                          std::size_t body_limit, const BodySink& sink, const ClientSettings& s) {
  auto& lowest = beast::get_lowest_layer(stream);
  bhttp::request<bhttp::empty_body> req{bhttp::verb::get, url.target, 11};
  req.set(bhttp::field::host, url.authority());
  req.set(bhttp::field::user_agent, s.user_agent);
  for (const auto& [k, v] : headers) req.set(k, v);
  lowest.expires_after(s.read_timeout);
  if (auto ec = run_op(ioc, [&](auto h) { bhttp::async_write(stream, req, h); }))
    return net_error(url, "sending a request to", ec);

  beast::flat_buffer buf;
  // Beast reads at most the buffer's free capacity (512 bytes when empty):
  // 64 KiB makes a blob ~200 recv calls per 12 MiB instead of ~25000.
  buf.reserve(std::size_t{64} * 1024);
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  lowest.expires_after(s.read_timeout);
  if (auto ec = run_op(ioc, [&](auto h) { bhttp::async_read_header(stream, buf, parser, h); }))
    return net_error(url, "reading the response of", ec);

  Response resp;
  resp.status = static_cast<int>(parser.get().result_int());
  for (const auto& f : parser.get())
    resp.headers.emplace(ascii_lower(f.name_string()), std::string(f.value()));
  const bool ok = resp.status >= 200 && resp.status < 300;
  const bool to_sink = ok && sink;
  const std::size_t limit = ok ? body_limit : kErrorBodyLimit;

  std::array<char, 64 * 1024> chunk;
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    lowest.expires_after(s.read_timeout);
    auto ec = run_op(ioc, [&](auto h) { bhttp::async_read(stream, buf, parser, h); });
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return net_error(url, "reading the body from", ec);
    const std::size_t n = chunk.size() - parser.get().body().size;
    if (n == 0) continue;
    if (to_sink) {
      if (auto st = sink(std::string_view(chunk.data(), n)); !st.ok()) return st.take_error();
    } else if (resp.body.size() + n > limit) {
      if (!ok) break;  // enough of an error page
      return Error::make(
          ErrorCode::kResourceExhausted,
          "the response from " + url.str() + " is larger than " + std::to_string(limit) + " bytes");
    } else {
      resp.body.append(chunk.data(), n);
    }
  }
  return resp;
}

// Whether a failed handshake failed on the peer's certificate (untrusted,
// expired, or not for this host), and what to say about it.
bool certificate_failure(SSL* ssl, const error_code& ec, const std::string& host,
                         std::string* why) {
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    *why = std::string("certificate verification failed: ") + X509_verify_cert_error_string(verify);
    return true;
  }
  if (ec.category() == asio::error::get_ssl_category() &&
      ERR_GET_REASON(static_cast<unsigned long>(ec.value())) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    *why = "certificate verification failed: the certificate is not for " + host;
    return true;
  }
  *why = ec.message();
  return false;
}

}  // namespace

Result<Response> Client::get(const Url& url,
                             const std::vector<std::pair<std::string, std::string>>& headers,
                             std::size_t body_limit, const BodySink& sink) {
  Impl& im = *impl_;
  tcp::resolver resolver(im.ioc);
  tcp::resolver::results_type endpoints;
  if (auto ec = run_op(im.ioc, [&](auto h) {
        resolver.async_resolve(url.host, url.port,
                               [h, &endpoints](error_code e, tcp::resolver::results_type r) {
                                 endpoints = std::move(r);
                                 h(e);
                               });
      }))
    return net_error(url, "resolving", ec);
  beast::tcp_stream tcp_stream(im.ioc);
  tcp_stream.expires_after(im.settings.connect_timeout);
  if (auto ec = run_op(im.ioc, [&](auto h) { tcp_stream.async_connect(endpoints, h); }))
    return net_error(url, "connecting to", ec);
  if (!url.tls) {
    auto r = exchange(im.ioc, tcp_stream, url, headers, body_limit, sink, im.settings);
    error_code ignored;
    tcp_stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return r;
  }
  if (!im.tls_setup_error.empty())
    return Error::make(ErrorCode::kInvalidArgument, im.tls_setup_error);
  beast::ssl_stream<beast::tcp_stream> stream(std::move(tcp_stream), im.tls);
  {
    // SNI only for names (RFC 6066 has no IP literals in it).
    error_code not_ip;
    (void)asio::ip::make_address(url.host, not_ip);
    if (not_ip) SSL_set_tlsext_host_name(stream.native_handle(), url.host.c_str());
  }
  stream.set_verify_callback(asio::ssl::host_name_verification(url.host));
  beast::get_lowest_layer(stream).expires_after(im.settings.connect_timeout);
  if (auto ec = run_op(
          im.ioc, [&](auto h) { stream.async_handshake(asio::ssl::stream_base::client, h); })) {
    std::string why;
    const bool cert = certificate_failure(stream.native_handle(), ec, url.host, &why);
    return Error::make(cert ? ErrorCode::kPermissionDenied : ErrorCode::kUnavailable,
                       "TLS handshake with " + url.authority() + ": " + why);
  }
  auto r = exchange(im.ioc, stream, url, headers, body_limit, sink, im.settings);
  error_code ignored;
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
  return r;
}

}  // namespace sandcastle::images::http
