#include "transport/http/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <spdlog/spdlog.h>

#include <array>
#include <deque>
#include <optional>
#include <set>

#include "transport/http/request_parser.h"
#include "common/metrics.h"
#include "transport/http/request_checks.h"
#include "transport/http/websocket_internal.h"

namespace sandcastle::transport::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

namespace {

const std::string kEmpty;

metrics::Counter& requests_with_status(int status) {
  return metrics::registry().counter(metrics::name::kHttpRequests, "HTTP requests answered, by status",
                                     {{"code", std::to_string(status)}});
}

std::string hex_size(size_t n) {
  char buf[32];
  int len = std::snprintf(buf, sizeof buf, "%zx", n);
  return std::string(buf, static_cast<size_t>(len));
}

}  // namespace

const std::string& Request::header(const std::string& lower_name) const {
  auto it = headers.find(lower_name);
  return it == headers.end() ? kEmpty : it->second;
}

Response Response::text(int status, std::string body, std::string content_type) {
  Response r;
  r.status = status;
  r.headers.emplace_back("Content-Type", std::move(content_type));
  r.body = std::move(body);
  return r;
}

Response Response::json(int status, std::string body) {
  return text(status, std::move(body), "application/json");
}

const char* reason_phrase(int status) {
  auto s = bhttp::obsolete_reason(static_cast<bhttp::status>(status));
  static thread_local std::string buf;
  buf.assign(s.data(), s.size());
  return buf.c_str();
}

std::string url_decode(std::string_view s, bool form) {
  std::string out;
  out.reserve(s.size());
  auto hexval = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
      if (a >= 0 && b >= 0) {
        out.push_back(static_cast<char>(a * 16 + b));
        i += 2;
        continue;
      }
    }
    out.push_back(form && s[i] == '+' ? ' ' : s[i]);
  }
  return out;
}

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------

struct Server::Impl {
  Impl(Server& s, Handler h) : server(s), handler(std::move(h)), acceptor(asio::make_strand(io)) {}

  Server& server;
  Handler handler;
  asio::io_context io;
  // On a strand of its own: the accept handler (which accepts again), the
  // back-off timer and stop_accepting's close run on any io thread, and an
  // acceptor is not safe to use from two at once (TSan saw accept and close).
  tcp::acceptor acceptor;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::mutex mu;
  std::set<std::shared_ptr<Connection>> conns;
  std::atomic<bool> accepting{false};

  void do_accept();
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(Server::Impl& impl, tcp::socket sock)
      : impl_(impl),
        stream_(std::move(sock)),
        deadline_(stream_.get_executor()),
        // Bytes received and not yet parsed: a head (the parser counts its
        // request line and fields apart, hence twice the header limit), a
        // chunked body's trailer, pipelined requests. Body bytes move on as
        // they are parsed. Beast bounds neither a trailer nor pipelining.
        buffer_(2 * impl.server.options().max_header_bytes + size_t{64} * 1024) {
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string();
  }

  void start() {
    asio::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }

  void close_now() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] { self->shutdown(); });
  }

  // "Connection: close", or how long an idle keep-alive connection stays
  // open: the server drops it after the request timeout, and a client that
  // knows this (undici, browsers) stops reusing it first instead of racing
  // the close with its next request. A timeout under a second cannot be
  // said, so such connections close.
  std::string connection_header() {
    const auto secs =
        std::chrono::duration_cast<std::chrono::seconds>(impl_.server.options().request_timeout).count();
    if (secs < 1) keep_alive_ = false;
    if (!keep_alive_) return "Connection: close\r\n";
    return "Keep-Alive: timeout=" + std::to_string(secs) + "\r\n";
  }

  // --- called through Exchange, from any thread --------------------------
  void respond(uint64_t gen, Response r) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen,
                                        r = std::move(r)]() mutable {
      if (gen != self->gen_ || self->dead_) return;
      requests_with_status(r.status).inc();
      std::string head = "HTTP/1." + std::to_string(self->version_ % 10) + " " + std::to_string(r.status) +
                         " " + reason_phrase(r.status) + "\r\n";
      bool has_len = false;
      for (auto& [k, v] : r.headers) {
        head += k + ": " + v + "\r\n";
        if (beast::iequals(k, "content-length")) has_len = true;
      }
      if (!has_len) head += "Content-Length: " + std::to_string(r.body.size()) + "\r\n";
      head += self->connection_header();
      head += "\r\n";
      head += r.body;
      self->response_done_ = true;
      self->enqueue(std::move(head));
    });
  }

  void start_stream(uint64_t gen, int status, Headers headers) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen, status,
                                        headers = std::move(headers)] {
      if (gen != self->gen_ || self->dead_) return;
      requests_with_status(status).inc();
      self->chunked_ = self->version_ >= 11;
      if (!self->chunked_) self->keep_alive_ = false;
      std::string head = "HTTP/1." + std::to_string(self->version_ % 10) + " " + std::to_string(status) + " " +
                         reason_phrase(status) + "\r\n";
      for (auto& [k, v] : headers) head += k + ": " + v + "\r\n";
      if (self->chunked_) head += "Transfer-Encoding: chunked\r\n";
      head += self->connection_header();
      head += "\r\n";
      self->enqueue(std::move(head));
    });
  }

  void write_chunk(uint64_t gen, std::string data) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen,
                                        data = std::move(data)]() mutable {
      if (gen != self->gen_ || self->dead_ || data.empty()) return;
      if (self->queued_ > self->impl_.server.options().max_queued_bytes) {
        spdlog::warn("http: dropping a stream to {}: client is not reading ({} bytes queued)", self->remote_,
                     self->queued_);
        self->shutdown();
        return;
      }
      if (self->chunked_) {
        std::string framed = hex_size(data.size()) + "\r\n";
        framed += data;
        framed += "\r\n";
        self->enqueue(std::move(framed));
      } else {
        self->enqueue(std::move(data));
      }
    });
  }

  void finish_stream(uint64_t gen) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen] {
      if (gen != self->gen_ || self->dead_) return;
      self->response_done_ = true;
      if (self->chunked_) {
        self->enqueue("0\r\n\r\n");
      } else {
        self->keep_alive_ = false;
        self->enqueue({});
      }
    });
  }

  void upgrade(uint64_t gen, std::shared_ptr<WsHandler> handler, Request req, WsOptions options) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen,
                                        handler = std::move(handler), req = std::move(req),
                                        options]() mutable {
      if (gen != self->gen_ || self->dead_) return;
      requests_with_status(101).inc();
      // This connection serves no more HTTP: its pending watch read ends,
      // and the socket moves to the WebSocket session. The connection stays
      // counted (and closable by Server::stop) until the session ends.
      self->upgraded_ = true;
      self->response_done_ = true;
      self->deadline_.cancel();
      self->pending_upgrade_.emplace(PendingUpgrade{std::move(handler), std::move(req), options});
      // The watch read must end before the socket changes hands: one stream
      // allows one read at a time. Its completion starts the session (a
      // client sends no frame before the 101, so it cannot have read one).
      if (self->watching_) {
        beast::error_code ignore;
        self->stream_.socket().cancel(ignore);
        return;
      }
      self->start_upgraded();
    });
  }

  void start_upgraded() {
    PendingUpgrade p = std::move(*pending_upgrade_);
    pending_upgrade_.reset();
    std::weak_ptr<Connection> weak = shared_from_this();
    ws_ = detail::start_websocket(std::move(stream_), p.req, std::move(p.handler), p.options, [weak] {
      if (auto c = weak.lock()) c->ws_ended();
    });
  }

  void abort(uint64_t gen) {
    asio::post(stream_.get_executor(), [self = shared_from_this(), gen] {
      if (gen != self->gen_) return;
      self->shutdown();
    });
  }

 private:
  void do_read() {
    if (dead_) return;
    exchange_.reset();
    parser_.emplace();
    limit_request_parser(*parser_, impl_.server.options());
    // Not the stream's own timeout: that closes the socket, and a client
    // whose request is late is owed a 408 on it.
    stream_.expires_never();
    reading_ = true;
    timed_out_ = false;
    const uint64_t seq = ++read_seq_;
    deadline_.expires_after(impl_.server.options().request_timeout);
    deadline_.async_wait([self = shared_from_this(), seq](beast::error_code ec) {
      if (ec || seq != self->read_seq_ || !self->reading_ || self->dead_) return;
      self->timed_out_ = true;
      // Every read from now on (the one pending, or one the parser is about
      // to start) ends at once; the socket can still send the 408.
      beast::error_code ignore;
      self->stream_.socket().shutdown(tcp::socket::shutdown_receive, ignore);
    });
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void reject(int status, const std::string& why) {
    keep_alive_ = false;
    ++gen_;
    version_ = 11;
    auto r = Response::json(status, std::string(R"({"error":")") + why + "\"}");
    // Answered directly: there is no exchange for a request that never parsed.
    requests_with_status(status).inc();
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
                       "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(r.body.size()) +
                       "\r\nConnection: close\r\n\r\n" + r.body;
    response_done_ = true;
    enqueue(std::move(head));
  }

  void on_read(beast::error_code ec) {
    reading_ = false;
    deadline_.cancel();
    if (timed_out_ && ec) {
      // A request that did not arrive whole in time (slow-loris) is told so;
      // an idle keep-alive connection with no byte of a next request is just
      // closed (RFC 9112 §9.5).
      if (parser_ && (parser_->got_some() || buffer_.size() > 0)) {
        reject(408, "request not received within the time limit");
      } else {
        shutdown();
      }
      return;
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::operation_aborted || ec == asio::error::connection_reset) {
      shutdown();
      return;
    }
    if (ec == bhttp::error::body_limit) {
      reject(413, "request body exceeds the limit of " +
                      std::to_string(impl_.server.options().max_body_bytes) + " bytes");
      return;
    }
    if (ec == bhttp::error::header_limit || ec == bhttp::error::buffer_overflow) {
      reject(431, "request headers exceed the limit of " +
                      std::to_string(impl_.server.options().max_header_bytes) + " bytes");
      return;
    }
    if (ec) {
      reject(400, "malformed HTTP request: " + ec.message());
      return;
    }
    auto msg = parser_->release();
    if (!admit(msg)) return;
    Request req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.version = msg.version();
    req.remote = remote_;
    version_ = msg.version();
    keep_alive_ = msg.keep_alive();
    auto q = req.target.find('?');
    req.path = url_decode(std::string_view(req.target).substr(0, q));
    if (q != std::string::npos) {
      std::string_view qs = std::string_view(req.target).substr(q + 1);
      while (!qs.empty()) {
        auto amp = qs.find('&');
        auto part = qs.substr(0, amp);
        auto eq = part.find('=');
        std::string k = url_decode(part.substr(0, eq), true);
        std::string v = eq == std::string_view::npos ? "" : url_decode(part.substr(eq + 1), true);
        req.query.emplace(std::move(k), std::move(v));
        if (amp == std::string_view::npos) break;
        qs.remove_prefix(amp + 1);
      }
    }
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      auto [it, inserted] = req.headers.emplace(name, std::string(f.value()));
      if (!inserted) it->second += ", " + std::string(f.value());
    }
    req.body = std::move(msg.body());
    ++gen_;
    response_done_ = false;
    chunked_ = false;
    auto ex = std::make_shared<Exchange>(shared_from_this(), gen_);
    exchange_ = ex;
    start_watch();
    try {
      impl_.handler(std::move(req), ex);
    } catch (const std::exception& e) {
      spdlog::error("http handler failed: {}", e.what());
      ex->respond(Response::json(500, R"({"error":"internal error"})"));
    }
  }

  // RFC 9112's checks on the head (request_checks.h); an absolute-form
  // target is routed as its origin-form, with its host as the Host.
  bool admit(bhttp::request<bhttp::string_body>& msg) {
    RequestHead head;
    head.method = msg.method_string();
    head.target = msg.target();
    head.version = msg.version();
    for (const auto& f : msg) {
      if (f.name() == bhttp::field::host) head.host.push_back(f.value());
      if (f.name() == bhttp::field::transfer_encoding) head.transfer_encoding.push_back(f.value());
    }
    HeadVerdict v = check_request_head(head);
    if (v.status) {
      reject(v.status, v.why);
      return false;
    }
    if (v.absolute_form) {
      msg.target(v.target);
      msg.set(bhttp::field::host, v.host);
    }
    return true;
  }

  // While a handler works on the answer, a read notices the client leaving.
  void start_watch() {
    // A client that pipelined a buffer's worth is not read further until
    // its next request is parsed.
    if (buffer_.max_size() - buffer_.size() < 4096) return;
    watching_ = true;
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->watching_ = false;
      if (self->upgraded_) {  // the socket becomes the WebSocket session's now
        if (self->pending_upgrade_) self->start_upgraded();
        return;
      }
      if (!ec) {
        self->buffer_.commit(n);  // a pipelined request: kept for the next read
        if (self->response_done_ && self->queue_.empty() && !self->writing_) self->next_request();
        return;
      }
      if (ec == asio::error::operation_aborted && !self->dead_) {
        if (self->response_done_ && self->queue_.empty() && !self->writing_) self->next_request();
        return;
      }
      self->shutdown();
    });
  }

  void enqueue(std::string data) {
    queued_ += data.size();
    queue_.push_back(std::move(data));
    if (!writing_) write_next();
  }

  void write_next() {
    if (queue_.empty()) {
      writing_ = false;
      if (response_done_) {
        if (!keep_alive_) {
          linger_then_shutdown();
        } else if (watching_) {
          beast::error_code ignore;
          stream_.socket().cancel(ignore);  // the watch completes, then the next read starts
        } else {
          next_request();
        }
      }
      return;
    }
    writing_ = true;
    // Everything queued goes out in one gathered write (one syscall, and
    // usually one TCP segment, for a header, an event and the last chunk).
    writing_bufs_.clear();
    while (!queue_.empty()) {
      writing_bufs_.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    std::vector<asio::const_buffer> bufs;
    bufs.reserve(writing_bufs_.size());
    for (const auto& b : writing_bufs_) bufs.push_back(asio::buffer(b));
    asio::async_write(stream_.socket(), bufs,
                      [self = shared_from_this()](beast::error_code ec, size_t) {
                        for (const auto& b : self->writing_bufs_) self->queued_ -= b.size();
                        self->writing_bufs_.clear();
                        if (ec) {
                          self->shutdown();
                          return;
                        }
                        self->write_next();
                      });
  }

  void next_request() {
    if (dead_ || next_started_gen_ == gen_) return;
    next_started_gen_ = gen_;
    do_read();
  }

  // A closing answer (a 4xx for a request still arriving) is not lost to a
  // reset: our side is half-closed once it is written, and what the client
  // still sends is read and dropped for a moment (RFC 9112 §9.6), at most
  // kLingerBytes in kLinger, before the socket closes.
  void linger_then_shutdown() {
    if (dead_) return;
    beast::error_code ignore;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignore);
    linger_left_ = kLingerBytes;
    deadline_.expires_after(kLinger);
    deadline_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->shutdown();
    });
    drain();
  }

  void drain() {
    stream_.socket().async_read_some(asio::buffer(linger_buf_),
                                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                                       if (ec || n >= self->linger_left_) return self->shutdown();
                                       self->linger_left_ -= n;
                                       self->drain();
                                     });
  }

  void ws_ended() {
    asio::post(impl_.io, [self = shared_from_this()] {
      self->dead_ = true;
      std::lock_guard lock(self->impl_.mu);
      self->impl_.conns.erase(self);
    });
  }

  void shutdown() {
    if (upgraded_) {
      if (ws_) ws_->going_away();
      return;
    }
    if (dead_) return;
    dead_ = true;
    deadline_.cancel();
    beast::error_code ignore;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignore);
    stream_.socket().close(ignore);
    if (auto ex = exchange_.lock()) ex->fire_close();
    auto self = shared_from_this();
    std::lock_guard lock(impl_.mu);
    impl_.conns.erase(self);
  }

  Server::Impl& impl_;
  beast::tcp_stream stream_;
  asio::steady_timer deadline_;  // the current request's (see do_read)
  uint64_t read_seq_ = 0;
  bool reading_ = false;
  bool timed_out_ = false;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::string remote_;
  std::weak_ptr<Exchange> exchange_;
  std::deque<std::string> queue_;
  std::vector<std::string> writing_bufs_;  // owned by the write in progress
  size_t queued_ = 0;
  uint64_t gen_ = 0;
  uint64_t next_started_gen_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  static constexpr std::chrono::milliseconds kLinger{1000};
  static constexpr size_t kLingerBytes = size_t{1} << 20;
  size_t linger_left_ = 0;
  std::array<char, 4096> linger_buf_{};
  bool chunked_ = false;
  bool writing_ = false;
  bool watching_ = false;
  struct PendingUpgrade {
    std::shared_ptr<WsHandler> handler;
    Request req;
    WsOptions options;
  };
  std::optional<PendingUpgrade> pending_upgrade_;  // waits for the watch read to end
  bool response_done_ = false;
  bool dead_ = false;
  bool upgraded_ = false;
  std::shared_ptr<detail::WsControl> ws_;
};

// ---------------------------------------------------------------------------

Exchange::Exchange(std::shared_ptr<Connection> conn, uint64_t generation)
    : conn_(std::move(conn)), generation_(generation) {}

Exchange::~Exchange() = default;

void Exchange::drop_callbacks() {
  // Callbacks may hold this exchange: release them once it is complete.
  std::vector<std::function<void()>> fns;
  std::lock_guard lock(mu_);
  fns.swap(on_close_);
}

void Exchange::respond(Response r) {
  if (done_.exchange(true)) return;
  drop_callbacks();
  // A stream under way has sent its head: a second head would land inside
  // its chunks and corrupt the connection. The stream ends instead.
  if (started_.exchange(true)) return conn_->finish_stream(generation_);
  conn_->respond(generation_, std::move(r));
}

void Exchange::start_stream(int status, Headers headers) {
  if (started_.exchange(true) || done_) return;
  conn_->start_stream(generation_, status, std::move(headers));
}

void Exchange::write(std::string data) {
  if (done_ || !started_) return;
  conn_->write_chunk(generation_, std::move(data));
}

void Exchange::finish() {
  if (done_.exchange(true)) return;
  drop_callbacks();
  conn_->finish_stream(generation_);
}

void Exchange::abort() {
  done_ = true;
  drop_callbacks();
  conn_->abort(generation_);
}

void Exchange::upgrade(std::shared_ptr<WsHandler> handler, const Request& req, const WsOptions& options) {
  if (done_.exchange(true)) return;
  drop_callbacks();
  started_ = true;
  conn_->upgrade(generation_, std::move(handler), req, options);
}

void Exchange::on_close(std::function<void()> fn) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      on_close_.push_back(std::move(fn));
      return;
    }
  }
  fn();
}

void Exchange::fire_close() {
  std::vector<std::function<void()>> fns;
  {
    std::lock_guard lock(mu_);
    if (done_) return;
    closed_ = true;
    fns.swap(on_close_);
  }
  done_ = true;
  for (auto& f : fns) f();
}

// ---------------------------------------------------------------------------

void Server::Impl::do_accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket sock) {
    if (ec) {
      if (ec == asio::error::operation_aborted || !accepting) return;
      spdlog::warn("http accept: {}", ec.message());
      if (ec == asio::error::no_descriptors) {
        // Out of file descriptors: back off briefly instead of spinning.
        auto t = std::make_shared<asio::steady_timer>(acceptor.get_executor(),
                                                      std::chrono::milliseconds(50));
        t->async_wait([this, t](beast::error_code) {
          if (accepting) do_accept();
        });
        return;
      }
    } else {
      sock.set_option(tcp::no_delay(true), ec);
      auto conn = std::make_shared<Connection>(*this, std::move(sock));
      bool over;
      {
        std::lock_guard lock(mu);
        over = conns.size() >= server.options().max_connections;
        conns.insert(conn);
      }
      conn->start();
      if (over) {
        spdlog::warn("http: connection limit ({}) reached", server.options().max_connections);
        conn->close_now();
      }
    }
    if (accepting) do_accept();
  });
}

Server::Server(ServerOptions options, Handler handler)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(*this, std::move(handler))) {}

Server::~Server() { stop(); }

Result<uint16_t> Server::listen() {
  beast::error_code ec;
  auto addr = asio::ip::make_address(options_.host, ec);
  if (ec) {
    // A host name (localhost): resolve it.
    tcp::resolver resolver(impl_->io);
    auto results = resolver.resolve(options_.host, std::to_string(options_.port), ec);
    if (ec || results.empty())
      return Error::make(ErrorCode::kInvalidArgument, "cannot resolve --host " + options_.host + ": " + ec.message());
    addr = results.begin()->endpoint().address();
  }
  tcp::endpoint ep(addr, options_.port);
  impl_->acceptor.open(ep.protocol(), ec);
  if (!ec) impl_->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->acceptor.bind(ep, ec);
  if (!ec) impl_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  const std::string where = options_.host + ":" + std::to_string(options_.port);
  if (ec == asio::error::address_in_use)
    return Error::make(ErrorCode::kAlreadyExists,
                       "cannot listen on " + where + ": port " + std::to_string(options_.port) +
                           " is already in use (another sandcastle, or another server, is there). Start on another "
                           "port with --port <number> (make run ARGS=\"--port 9000\"), or --port 0 for any free one");
  if (ec == asio::error::access_denied && options_.port < 1024)
    return Error::make(ErrorCode::kPermissionDenied,
                       "cannot listen on " + where + ": ports below 1024 need privileges; use --port 1024 or above "
                       "(the default is 8181)");
  if (ec) return Error::make(ErrorCode::kUnavailable, "cannot listen on " + where + ": " + ec.message());
  return impl_->acceptor.local_endpoint().port();
}

void Server::start() {
  impl_->accepting = true;
  impl_->do_accept();
  impl_->work.emplace(impl_->io.get_executor());
  for (size_t i = 0; i < std::max<size_t>(1, options_.threads); ++i)
    impl_->threads.emplace_back([this] { impl_->io.run(); });
}

void Server::stop_accepting() {
  if (!impl_->accepting.exchange(false)) return;
  asio::post(impl_->acceptor.get_executor(), [this] {
    beast::error_code ignore;
    impl_->acceptor.close(ignore);
  });
}

void Server::stop() {
  stop_accepting();
  std::vector<std::shared_ptr<Connection>> conns;
  {
    std::lock_guard lock(impl_->mu);
    conns.assign(impl_->conns.begin(), impl_->conns.end());
  }
  for (auto& c : conns) c->close_now();
  impl_->work.reset();
  // Give the closes a moment to run, then stop the loop.
  if (!impl_->threads.empty()) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (connections() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl_->io.stop();
  for (auto& t : impl_->threads)
    if (t.joinable()) t.join();
  impl_->threads.clear();
}

size_t Server::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->conns.size();
}

void Server::schedule(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto t = std::make_shared<asio::steady_timer>(impl_->io, delay);
  t->async_wait([t, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

}  // namespace sandcastle::transport::http
