#include "sandbox/engine/engine_http.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <functional>
#include <limits>
#include <utility>
#include <vector>

namespace sandcastle::sandbox::engine {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::uint32_t kHeaderLimit = 64u * 1024u;
constexpr std::size_t kChunk = std::size_t{64} * 1024;

}  // namespace

HttpCall::HttpCall(const Endpoint& endpoint, asio::ssl::context* tls,
                   std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout,
                   CancelToken* cancel)
    : endpoint_(endpoint),
      tls_(tls),
      timeout_(timeout),
      connect_timeout_(connect_timeout),
      cancel_(cancel) {
  // 0: no deadline for the whole call (a long-lived exec session).
  deadline_.expires_after(timeout_.count() > 0 ? timeout_ : std::chrono::hours(24 * 365));
  deadline_.async_wait([this](error_code ec) {
    if (ec) return;
    timed_out_ = true;
    close_now();
  });
  if (cancel_) {
    // post() is the one thread-safe way into ioc_; the close runs in the
    // calling thread, between or during its operations.
    cancel_->set_channel([this](CancelToken::Signal sig) {
      if (sig != CancelToken::Signal::kCancel) return false;  // nothing to interrupt
      asio::post(ioc_, [this] {
        cancelled_ = true;
        close_now();
      });
      return true;
    });
    if (cancel_->cancelled()) cancelled_ = true;
  }
}

HttpCall::~HttpCall() {
  if (cancel_) cancel_->set_channel(nullptr);
}

std::string HttpCall::what() const {
  return "engine " + endpoint_.str() + (request_line_.empty() ? "" : ": " + request_line_);
}

template <typename Start>
error_code HttpCall::run(Start&& start) {
  if (cancelled_ || timed_out_) return asio::error::operation_aborted;
  bool done = false;
  error_code result;
  start([&done, &result](error_code ec, auto&&...) {
    result = ec;
    done = true;
  });
  ioc_.restart();
  while (!done && ioc_.run_one() > 0) {
  }
  return result;
}

template <typename F>
auto HttpCall::with_stream(F&& f) {
  if (auto* u = std::get_if<UnixSocket>(&stream_)) return f(*u);
  if (auto* t = std::get_if<TcpSocket>(&stream_)) return f(*t);
  return f(*std::get<std::unique_ptr<TlsStream>>(stream_));
}

void HttpCall::close_now() {
  closed_ = true;
  error_code ignored;
  if (auto* u = std::get_if<UnixSocket>(&stream_)) u->close(ignored);
  if (auto* t = std::get_if<TcpSocket>(&stream_)) t->close(ignored);
  if (auto* s = std::get_if<std::unique_ptr<TlsStream>>(&stream_))
    (*s)->lowest_layer().close(ignored);
  if (local_) local_->close(ignored);
}

Error HttpCall::io_error(const char* doing, const error_code& ec) const {
  if (cancelled_) return Error::make(ErrorCode::kCancelled, what() + ": cancelled");
  if (timed_out_)
    return Error::make(ErrorCode::kTimeout,
                       what() + ": no answer within " + std::to_string(timeout_.count()) + " ms");
  ErrorCode code = ErrorCode::kUnavailable;
  if (ec == asio::error::access_denied) code = ErrorCode::kPermissionDenied;
  return Error::make(code, what() + ": " + doing + ": " + ec.message());
}

template <typename Start>
error_code HttpCall::connect_within(Start&& start) {
  // Its own deadline, shorter than the call's: an engine that is not there
  // should fail fast. connecting_ makes a late expiry a no-op.
  asio::steady_timer timer(ioc_);
  timer.expires_after(connect_timeout_);
  connecting_ = true;
  timer.async_wait([this](error_code e) {
    if (e || !connecting_) return;
    connect_timed_out_ = true;
    close_now();
  });
  error_code ec = run(std::forward<Start>(start));
  connecting_ = false;
  timer.cancel();
  return ec;
}

Error HttpCall::connect_error(const error_code& ec) const {
  if (connect_timed_out_ && !cancelled_ && !timed_out_)
    return Error::make(ErrorCode::kTimeout, what() + ": cannot connect within " +
                                                std::to_string(connect_timeout_.count()) + " ms");
  return io_error("cannot connect", ec);
}

Status HttpCall::open() {
  if (cancelled_) return io_error("connecting", asio::error::operation_aborted);
  if (endpoint_.kind == Endpoint::Kind::kUnix) {
    // Our own socket() so the fd is O_CLOEXEC (asio's own is not).
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error::from_errno(what() + ": socket");
    auto& sock = stream_.emplace<UnixSocket>(ioc_);
    error_code ec;
    sock.assign(asio::local::stream_protocol(), fd, ec);
    if (ec) {
      ::close(fd);
      return io_error("socket", ec);
    }
    ec = connect_within([&](auto h) {
      sock.async_connect(asio::local::stream_protocol::endpoint(endpoint_.path), std::move(h));
    });
    if (ec) {
      Error e = connect_error(ec);
      if (ec == asio::error::connection_refused ||
          ec == boost::system::errc::no_such_file_or_directory)
        e.context += " (is the engine running?)";
      return e;
    }
    return ok_status();
  }
  return connect_tcp();
}

Status HttpCall::connect_tcp() {
  asio::ip::tcp::resolver resolver(ioc_);
  asio::ip::tcp::resolver::results_type results;
  error_code ec = run([&](auto h) {
    resolver.async_resolve(endpoint_.host, endpoint_.port,
                           [h = std::move(h), &results](error_code e, auto r) mutable {
                             results = std::move(r);
                             h(e);
                           });
  });
  if (ec) return io_error("resolving the host", ec);
  ec = asio::error::host_not_found;
  for (const auto& entry : results) {
    const auto ep = entry.endpoint();
    const int fd = ::socket(ep.protocol().family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error::from_errno(what() + ": socket");
    auto& sock = stream_.emplace<TcpSocket>(ioc_);
    error_code aec;
    sock.assign(ep.protocol(), fd, aec);
    if (aec) {
      ::close(fd);
      return io_error("socket", aec);
    }
    ec = connect_within([&](auto h) { sock.async_connect(ep, std::move(h)); });
    if (!ec || connect_timed_out_ || cancelled_ || timed_out_) break;
  }
  if (ec) return connect_error(ec);
  error_code ignored;
  std::get<TcpSocket>(stream_).set_option(asio::ip::tcp::no_delay(true), ignored);
  if (!endpoint_.tls) return ok_status();

  TcpSocket plain = std::move(std::get<TcpSocket>(stream_));
  auto tls = std::make_unique<TlsStream>(std::move(plain), *tls_);
  error_code not_ip;
  (void)asio::ip::make_address(endpoint_.host, not_ip);
  if (not_ip) SSL_set_tlsext_host_name(tls->native_handle(), endpoint_.host.c_str());
  tls->set_verify_callback(asio::ssl::host_name_verification(endpoint_.host));
  auto& ref = *tls;
  stream_ = std::move(tls);
  ec = run([&](auto h) { ref.async_handshake(asio::ssl::stream_base::client, std::move(h)); });
  if (ec) {
    Error e = io_error("TLS handshake", ec);
    const long verify = SSL_get_verify_result(ref.native_handle());
    if (!cancelled_ && !timed_out_ && verify != X509_V_OK) {
      e.code = ErrorCode::kPermissionDenied;
      e.context += std::string(" (") + X509_verify_cert_error_string(verify) + ")";
    }
    return e;
  }
  return ok_status();
}

Status HttpCall::send(const HttpRequest& r) {
  request_line_ = std::string(bhttp::to_string(r.verb)) + " " + r.target;
  const std::string host =
      endpoint_.kind == Endpoint::Kind::kUnix ? "docker" : endpoint_.host + ":" + endpoint_.port;
  auto set_common = [&](auto& req) {
    req.set(bhttp::field::host, host);
    req.set(bhttp::field::user_agent, "sandcastle");
    if (!r.content_type.empty()) req.set(bhttp::field::content_type, r.content_type);
    if (r.upgrade) {
      req.set(bhttp::field::connection, "Upgrade");
      req.set(bhttp::field::upgrade, "tcp");
    }
  };
  error_code ec;
  if (r.source == nullptr) {
    bhttp::request<bhttp::string_body> req{r.verb, r.target, 11};
    set_common(req);
    if (r.body) req.body() = *r.body;
    req.prepare_payload();
    ec = with_stream(
        [&](auto& s) { return run([&](auto h) { bhttp::async_write(s, req, std::move(h)); }); });
    if (ec) return io_error("sending the request", ec);
    return ok_status();
  }
  bhttp::request<bhttp::empty_body> req{r.verb, r.target, 11};
  set_common(req);
  req.chunked(true);
  bhttp::request_serializer<bhttp::empty_body> sr{req};
  ec = with_stream([&](auto& s) {
    return run([&](auto h) { bhttp::async_write_header(s, sr, std::move(h)); });
  });
  if (ec) return io_error("sending the request", ec);
  std::array<char, kChunk> chunk;
  for (;;) {
    auto n = (*r.source)(chunk.data(), chunk.size());
    if (!n.ok()) return n.take_error();
    if (*n > chunk.size())
      return Error::make(ErrorCode::kInternal, what() + ": a body source overran its buffer");
    if (*n == 0) break;
    ec = with_stream([&](auto& s) {
      return run([&](auto h) {
        asio::async_write(s, bhttp::make_chunk(asio::buffer(chunk.data(), *n)), std::move(h));
      });
    });
    if (ec) return io_error("sending the request body", ec);
  }
  ec = with_stream([&](auto& s) {
    return run([&](auto h) { asio::async_write(s, bhttp::make_chunk_last(), std::move(h)); });
  });
  if (ec) return io_error("sending the request body", ec);
  return ok_status();
}

Result<HttpHead> HttpCall::read_head() {
  parser_.emplace();
  parser_->header_limit(kHeaderLimit);
  parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
  // Beast reads at most the buffer's free space: 64 KiB per read, not 512.
  buffer_.reserve(kChunk);
  error_code ec = with_stream([&](auto& s) {
    return run([&](auto h) { bhttp::async_read_header(s, buffer_, *parser_, std::move(h)); });
  });
  if (ec) return io_error("reading the response", ec);
  HttpHead head;
  head.status = static_cast<int>(parser_->get().result_int());
  head.reason = std::string(parser_->get().reason());
  return head;
}

Status HttpCall::read_body_to(const ByteSink& sink, std::size_t limit) {
  std::array<char, kChunk> chunk;
  std::size_t total = 0;
  while (!parser_->is_done()) {
    parser_->get().body().data = chunk.data();
    parser_->get().body().size = chunk.size();
    error_code ec = with_stream([&](auto& s) {
      return run([&](auto h) { bhttp::async_read(s, buffer_, *parser_, std::move(h)); });
    });
    if (ec == bhttp::error::need_buffer) ec = {};
    if (ec) return io_error("reading the response body", ec);
    const std::size_t n = chunk.size() - parser_->get().body().size;
    if (n == 0) continue;
    total += n;
    if (total > limit)
      return Error::make(ErrorCode::kResourceExhausted, what() + ": the response body is past " +
                                                            std::to_string(limit) + " bytes");
    if (auto st = sink(std::string_view(chunk.data(), n)); !st.ok()) return st;
  }
  return ok_status();
}

Status HttpCall::read_body(std::string* out, std::size_t limit, bool truncate) {
  auto st = read_body_to(
      [&](std::string_view piece) -> Status {
        if (out->size() + piece.size() > limit) {
          if (truncate) out->append(piece.substr(0, limit - out->size()));
          return Error::make(
              ErrorCode::kResourceExhausted,
              what() + ": the response body is past " + std::to_string(limit) + " bytes");
        }
        out->append(piece);
        return ok_status();
      },
      std::numeric_limits<std::size_t>::max());
  if (!st.ok() && truncate && st.error().code == ErrorCode::kResourceExhausted) return ok_status();
  return st;
}

Status HttpCall::duplex(const ByteSource* in, const ByteSink& out) {
  // Bytes the header read took past the header belong to the stream.
  if (buffer_.size() > 0) {
    const auto data = buffer_.data();
    auto st = out(std::string_view(static_cast<const char*>(data.data()), data.size()));
    buffer_.consume(buffer_.size());
    if (!st.ok()) return st;
  }
  std::optional<Error> failure;
  bool reading = true;
  bool writing = in != nullptr;
  std::array<char, kChunk> rbuf;
  std::array<char, kChunk> wbuf;
  auto fail = [&](Error e) {
    if (!failure) failure = std::move(e);
    close_now();
  };

  std::function<void()> read_more = [&] {
    with_stream([&](auto& s) {
      s.async_read_some(asio::buffer(rbuf), [&](error_code ec, std::size_t n) {
        if (n > 0 && !failure) {
          if (auto st = out(std::string_view(rbuf.data(), n)); !st.ok()) fail(st.take_error());
        }
        if (ec) {
          reading = false;
          const bool eof = ec == asio::error::eof || ec == asio::ssl::error::stream_truncated;
          if (!eof && !failure) fail(io_error("reading the stream", ec));
          // The engine closed the stream: the process is done, and stdin
          // not yet written has no reader.
          if (eof && writing) close_now();
          return;
        }
        if (!failure)
          read_more();
        else
          reading = false;
      });
      return 0;
    });
  };
  std::function<void()> write_more = [&] {
    auto n = (*in)(wbuf.data(), wbuf.size());
    if (!n.ok()) {
      writing = false;
      fail(n.take_error());
      return;
    }
    if (*n == 0 || *n > wbuf.size()) {
      writing = false;
      // stdin's EOF. Over TLS this is a TCP half-close without close_notify:
      // Go's TLS reader (dockerd, Podman) reports it as EOF, which is what
      // they turn into the process's stdin EOF.
      error_code ignored;
      with_stream([&](auto& s) {
        beast::get_lowest_layer(s).shutdown(asio::socket_base::shutdown_send, ignored);
        return 0;
      });
      return;
    }
    with_stream([&](auto& s) {
      asio::async_write(s, asio::buffer(wbuf.data(), *n), [&](error_code ec, std::size_t) {
        if (ec) {
          writing = false;
          // A closed stream (the process exited without reading) is the
          // reader's to report.
          if (reading && !failure && !closed_) fail(io_error("writing stdin", ec));
          return;
        }
        if (!failure && reading)
          write_more();
        else
          writing = false;
      });
      return 0;
    });
  };

  if (cancelled_ || timed_out_) return io_error("streaming", asio::error::operation_aborted);
  read_more();
  if (writing) write_more();
  ioc_.restart();
  while ((reading || writing) && ioc_.run_one() > 0) {
  }
  if (failure) return *failure;
  if (cancelled_ || timed_out_) return io_error("streaming", asio::error::operation_aborted);
  return ok_status();
}

std::string HttpCall::take_buffered() {
  const auto data = buffer_.data();
  std::string out(static_cast<const char*>(data.data()), data.size());
  buffer_.consume(buffer_.size());
  return out;
}

template <typename Start>
error_code HttpCall::run_within(std::chrono::milliseconds timeout, Start&& start) {
  asio::steady_timer timer(ioc_);
  timer.expires_after(timeout);
  in_op_ = true;
  op_timed_out_ = false;
  timer.async_wait([this](error_code e) {
    if (e || !in_op_) return;
    op_timed_out_ = true;
    // Cancel, not close: the operation ends, the stream stays.
    error_code ignored;
    with_stream([&](auto& s) {
      beast::get_lowest_layer(s).cancel(ignored);
      return 0;
    });
  });
  error_code ec = run(std::forward<Start>(start));
  in_op_ = false;
  timer.cancel();
  return ec;
}

Status HttpCall::write_all(std::string_view data, std::chrono::milliseconds timeout) {
  error_code ec = with_stream([&](auto& s) {
    return run_within(timeout, [&](auto h) {
      asio::async_write(s, asio::buffer(data.data(), data.size()), std::move(h));
    });
  });
  if (ec && op_timed_out_ && !cancelled_ && !timed_out_) {
    // A write cut short leaves the stream with part of the data: unusable.
    close_now();
    return Error::make(ErrorCode::kTimeout, what() +
                                                ": the process did not take its input within " +
                                                std::to_string(timeout.count()) + " ms");
  }
  if (ec) return io_error("writing stdin", ec);
  return ok_status();
}

Result<std::size_t> HttpCall::read_some(char* buf, std::size_t cap,
                                        std::chrono::milliseconds timeout) {
  std::size_t got = 0;
  error_code ec = with_stream([&](auto& s) {
    return run_within(timeout, [&](auto h) {
      s.async_read_some(asio::buffer(buf, cap),
                        [h = std::move(h), &got](error_code e, std::size_t n) mutable {
                          got = n;
                          h(e);
                        });
    });
  });
  if (got > 0) return got;
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return std::size_t{0};
  if (ec && op_timed_out_ && !cancelled_ && !timed_out_)
    return Error::make(ErrorCode::kTimeout,
                       what() + ": no output within " + std::to_string(timeout.count()) + " ms");
  if (ec) return io_error("reading the stream", ec);
  return std::size_t{0};
}

Status HttpCall::shutdown_send() {
  error_code ec;
  with_stream([&](auto& s) {
    beast::get_lowest_layer(s).shutdown(asio::socket_base::shutdown_send, ec);
    return 0;
  });
  if (ec) return io_error("closing stdin", ec);
  return ok_status();
}

Result<int> HttpCall::dup_stream_fd() {
  int native = -1;
  if (auto* u = std::get_if<UnixSocket>(&stream_)) native = u->native_handle();
  if (auto* t = std::get_if<TcpSocket>(&stream_)) native = t->native_handle();
  if (native < 0)
    return Error::make(ErrorCode::kUnavailable,
                       what() + ": a TLS stream cannot be handed on as a descriptor");
  int fd = ::fcntl(native, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return Error::from_errno("dup the engine stream");
  // Asio left the socket non-blocking; the relay sets what it needs.
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

void HttpCall::stop() {
  asio::post(ioc_, [this] { close_now(); });
}

void HttpCall::forget_cancel() {
  if (!cancel_) return;
  cancel_->set_channel(nullptr);
  cancel_ = nullptr;
}

Status HttpCall::relay(UniqueFd local_fd) {
  // The exec lives as long as its agent: the call's deadline is over.
  deadline_.cancel();
  error_code ec;
  auto& local = local_.emplace(ioc_);
  local.assign(asio::local::stream_protocol(), local_fd.release(), ec);
  if (ec) return io_error("relay socket", ec);
  if (closed_ || cancelled_ || timed_out_)
    return io_error("relaying", asio::error::operation_aborted);
  // Once the engine's side ended, a local side that does not close its end
  // in this time is not waited for.
  constexpr auto kLinger = std::chrono::seconds(10);

  std::optional<Error> failure;
  bool down = true;  // engine -> local
  bool up = true;    // local -> engine
  std::vector<char> dbuf(kChunk);
  std::vector<char> ubuf(kChunk);
  asio::steady_timer linger(ioc_);
  auto fail = [&](Error e) {
    if (!failure && !closed_) failure = std::move(e);
    close_now();
  };
  auto is_eof = [](const error_code& e) {
    return e == asio::error::eof || e == asio::ssl::error::stream_truncated;
  };
  auto start_linger = [&] {
    linger.expires_after(kLinger);
    linger.async_wait([&](error_code e) {
      if (!e) close_now();
    });
  };
  std::function<void(error_code)> down_ended = [&](error_code e) {
    down = false;
    if (is_eof(e)) {
      error_code ignored;
      local.shutdown(asio::socket_base::shutdown_send, ignored);
      if (up) start_linger();
      return;
    }
    fail(io_error("reading the stream", e));
  };
  std::function<void()> read_down = [&] {
    with_stream([&](auto& s) {
      s.async_read_some(asio::buffer(dbuf), [&](error_code e, std::size_t n) {
        if (n == 0) return down_ended(e ? e : asio::error::eof);
        asio::async_write(local, asio::buffer(dbuf.data(), n), [&, e](error_code we, std::size_t) {
          if (we) {
            // The local side is gone: nobody reads the process any more.
            down = false;
            return close_now();
          }
          if (e) return down_ended(e);
          read_down();
        });
      });
      return 0;
    });
  };
  std::function<void(error_code)> up_ended = [&](error_code e) {
    up = false;
    if (e == asio::error::eof) {
      // stdin's EOF: a TCP half-close (see duplex), the agent then exits.
      error_code ignored;
      with_stream([&](auto& s) {
        beast::get_lowest_layer(s).shutdown(asio::socket_base::shutdown_send, ignored);
        return 0;
      });
      if (down) start_linger();
      return;
    }
    close_now();
  };
  std::function<void()> read_up = [&] {
    local.async_read_some(asio::buffer(ubuf), [&](error_code e, std::size_t n) {
      if (n == 0) return up_ended(e ? e : asio::error::eof);
      with_stream([&](auto& s) {
        asio::async_write(s, asio::buffer(ubuf.data(), n), [&, e](error_code we, std::size_t) {
          if (we) {
            up = false;
            return fail(io_error("writing the stream", we));
          }
          if (e) return up_ended(e);
          read_up();
        });
        return 0;
      });
    });
  };

  read_down();
  read_up();
  ioc_.restart();
  while ((down || up) && ioc_.run_one() > 0) {
  }
  close_now();
  linger.cancel();
  // Aborted handlers still queued refer to this frame: run them now.
  ioc_.restart();
  ioc_.poll();
  if (failure) return *failure;
  return ok_status();
}

}  // namespace sandcastle::sandbox::engine
