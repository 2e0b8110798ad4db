#include "transport/http/websocket.h"

#include <spdlog/spdlog.h>

#include <boost/asio.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <deque>

#include "transport/http/authority.h"
#include "transport/http/websocket_internal.h"

namespace sandcastle::transport::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace websocket = boost::beast::websocket;

namespace {

std::string lower_copy(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool has_token(const std::string& value, const std::string& token) {
  // A comma-separated list, case-insensitive ("keep-alive, Upgrade").
  std::string v = lower_copy(value);
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t end = v.find(',', pos);
    if (end == std::string::npos) end = v.size();
    size_t a = pos, b = end;
    while (a < b && (v[a] == ' ' || v[a] == '\t')) ++a;
    while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t')) --b;
    if (v.compare(a, b - a, token) == 0) return true;
    pos = end + 1;
  }
  return false;
}

class WsSession : public WsConnection,
                  public detail::WsControl,
                  public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream stream, std::shared_ptr<WsHandler> handler, WsOptions options,
            std::function<void()> on_end)
      : ws_(std::move(stream)),
        handler_(std::move(handler)),
        options_(options),
        on_end_(std::move(on_end)) {}

  void run(bhttp::request<bhttp::empty_body> req) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = options_.handshake_timeout;
    t.idle_timeout = options_.idle_timeout;
    t.keep_alive_pings = true;
    ws_.set_option(t);
    ws_.read_message_max(options_.max_message_bytes);
    ws_.auto_fragment(false);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(bhttp::field::server, "sandcastle"); }));
    ws_.async_accept(req,
                     [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  // --- WsConnection (any thread) -------------------------------------------
  void send_text(std::string text) override { post_send(Item::kText, std::move(text)); }
  void send_binary(std::string bytes) override { post_send(Item::kBinary, std::move(bytes)); }
  void close(uint16_t code, std::string reason) override {
    asio::post(ws_.get_executor(),
               [self = shared_from_this(), code, reason = std::move(reason)]() mutable {
                 self->begin_close(code, std::move(reason));
               });
  }
  bool closed() const override { return ended_.load(); }
  size_t queued() const override { return queued_.load(); }

  // --- WsControl -------------------------------------------------------------
  void going_away() override { close(ws_close::kGoingAway, "server shutting down"); }

 private:
  struct Item {
    enum Kind { kText, kBinary } kind;
    std::string data;
  };

  void on_accept(beast::error_code ec) {
    if (ec) {
      // Beast has answered a bad handshake (400/426) itself.
      spdlog::debug("websocket handshake: {}", ec.message());
      return end(1006);
    }
    if (ended_) return;
    open_ = true;
    if (!guarded([&] { handler_->on_open(shared_from_this()); })) return;
    do_read();
    if (closing_) write_next();  // closed (server stop) during the handshake
  }

  void do_read() {
    ws_.async_read(
        in_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  void on_read(beast::error_code ec) {
    if (ec) {
      uint16_t code = 1006;
      if (ec == websocket::error::closed)
        code = static_cast<uint16_t>(ws_.reason().code);
      else if (ec == websocket::error::message_too_big)
        code = ws_close::kTooBig;
      else if (sent_close_)
        code = close_code_;
      return end(code);
    }
    if (ended_) return;
    std::string msg = beast::buffers_to_string(in_.data());
    in_.consume(in_.size());
    const bool text = ws_.got_text();
    if (!guarded([&] {
          text ? handler_->on_text(std::move(msg)) : handler_->on_binary(std::move(msg));
        }))
      return;
    if (!ended_) do_read();
  }

  void post_send(Item::Kind kind, std::string data) {
    asio::post(
        ws_.get_executor(), [self = shared_from_this(), kind, data = std::move(data)]() mutable {
          if (self->ended_ || self->closing_) return;
          // Messages no larger than the client may send us: its limit is likely ours.
          size_t off = 0;
          do {
            size_t n = std::min(data.size() - off, self->options_.max_message_bytes);
            self->queued_.fetch_add(n);
            self->queue_.push_back({kind, data.substr(off, n)});
            off += n;
          } while (off < data.size());
          if (self->queued_ > self->options_.max_queued_bytes) {
            // A close frame would wait behind the same full socket: drop it.
            spdlog::warn("websocket: the client is not reading ({} bytes queued): dropping it",
                         self->queued_.load());
            return self->end(ws_close::kPolicyViolation);
          }
          self->write_next();
        });
  }

  void write_next() {
    if (writing_ || ended_ || !open_) return;
    if (queue_.empty()) {
      if (closing_ && !sent_close_) do_close();
      return;
    }
    writing_ = true;
    Item& item = queue_.front();
    ws_.text(item.kind == Item::kText);
    ws_.async_write(asio::buffer(item.data),
                    [self = shared_from_this()](beast::error_code ec, size_t) {
                      self->writing_ = false;
                      if (self->ended_) return self->queue_.clear();
                      self->queued_.fetch_sub(self->queue_.front().data.size());
                      self->queue_.pop_front();
                      if (ec) return self->end(1006);
                      self->write_next();
                    });
  }

  void begin_close(uint16_t code, std::string reason) {
    if (closing_ || ended_) return;
    closing_ = true;
    close_code_ = code;
    close_reason_ = std::move(reason);
    if (!open_) return;  // the handshake's failure or success decides
    write_next();
  }

  void do_close() {
    sent_close_ = true;
    websocket::close_reason cr(static_cast<websocket::close_code>(close_code_), close_reason_);
    ws_.async_close(
        cr, [self = shared_from_this()](beast::error_code) { self->end(self->close_code_); });
  }

  // A handler's exception ends this connection (1011), never the I/O thread
  // and with it the server: the handlers parse what a client sent.
  template <typename F>
  bool guarded(F&& f) {
    try {
      f();
      return true;
    } catch (const std::exception& e) {
      spdlog::warn("websocket handler: {}", e.what());
      close(ws_close::kInternalError, "internal error");
      return false;
    }
  }

  void end(uint16_t code) {
    if (ended_.exchange(true)) return;
    beast::error_code ignore;
    beast::get_lowest_layer(ws_).socket().shutdown(asio::ip::tcp::socket::shutdown_both, ignore);
    beast::get_lowest_layer(ws_).socket().close(ignore);
    // The write in flight still refers to the front item: it goes when that ends.
    while (queue_.size() > (writing_ ? 1u : 0u)) queue_.pop_back();
    if (open_) {
      try {
        handler_->on_close(code);
      } catch (const std::exception& e) {
        spdlog::warn("websocket handler, at close: {}", e.what());
      }
    }
    if (on_end_) on_end_();
    on_end_ = nullptr;
    handler_.reset();  // a handler holding its connection would otherwise keep both alive
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<WsHandler> handler_;
  WsOptions options_;
  std::function<void()> on_end_;
  beast::flat_buffer in_;
  std::deque<Item> queue_;
  std::atomic<size_t> queued_{0};
  bool open_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool sent_close_ = false;
  uint16_t close_code_ = ws_close::kNormal;
  std::string close_reason_;
  std::atomic<bool> ended_{false};
};

}  // namespace

bool is_websocket_upgrade(const Request& req) {
  return req.method == "GET" && has_token(req.header("upgrade"), "websocket") &&
         has_token(req.header("connection"), "upgrade");
}

bool websocket_origin_ok(const Request& req) {
  if (!req.has_header("origin")) return true;
  auto origin = parse_origin(req.header("origin"));
  auto host = parse_authority(req.header("host"));
  if (!origin || !host) return false;
  if (origin->scheme != "http" && origin->scheme != "https") return false;
  if (origin->authority.host != host->host) return false;
  const uint32_t dflt = origin->scheme == "https" ? 443 : 80;
  return origin->authority.port.value_or(dflt) == host->port.value_or(dflt);
}

namespace detail {

std::shared_ptr<WsControl> start_websocket(beast::tcp_stream stream, const Request& req,
                                           std::shared_ptr<WsHandler> handler, WsOptions options,
                                           std::function<void()> on_end) {
  bhttp::request<bhttp::empty_body> head;
  head.method_string(req.method);
  head.target(req.target);
  head.version(req.version);
  for (const auto& [name, value] : req.headers) head.set(name, value);
  auto s = std::make_shared<WsSession>(std::move(stream), std::move(handler), options,
                                       std::move(on_end));
  s->run(std::move(head));
  return s;
}

}  // namespace detail

}  // namespace sandcastle::transport::http
