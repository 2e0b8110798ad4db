// The WebSocket upgrade of the HTTP server, against a real server on
// loopback and Beast's client: echo both ways, the frame-size limit (1009),
// pings of an idle connection, big sends split, the send-queue bound (a
// client that does not read is dropped with 1008), and 1001 at server stop.
#include "transport/http/websocket.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/websocket.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

namespace sandcastle::transport::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using tcp = net::ip::tcp;

// Echoes, and records what happened for the test to wait on.
class Recorder : public WsHandler {
 public:
  explicit Recorder(bool echo) : echo_(echo) {}
  void on_open(std::shared_ptr<WsConnection> c) override {
    std::lock_guard lock(mu_);
    conn_ = std::move(c);
    cv_.notify_all();
  }
  void on_text(std::string t) override {
    if (echo_) conn()->send_text("echo:" + t);
  }
  void on_binary(std::string b) override {
    if (echo_) conn()->send_binary(b);
  }
  void on_close(uint16_t code) override {
    std::lock_guard lock(mu_);
    closed_ = code;
    cv_.notify_all();
  }
  std::shared_ptr<WsConnection> conn() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return conn_ != nullptr; });
    return conn_;
  }
  int wait_closed() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return closed_ >= 0; });
    return closed_;
  }

 private:
  bool echo_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<WsConnection> conn_;
  int closed_ = -1;
};

class WebSocketTest : public ::testing::Test {
 protected:
  void start(WsOptions ws, bool echo = true) {
    ws_ = ws;
    handler_ = std::make_shared<Recorder>(echo);
    ServerOptions o;
    o.port = 0;
    server_ = std::make_unique<Server>(o, [this](Request&& req, std::shared_ptr<Exchange> ex) {
      if (req.path != "/ws" || !is_websocket_upgrade(req))
        return ex->respond(Response::text(404, "no"));
      if (!websocket_origin_ok(req)) return ex->respond(Response::text(403, "origin"));
      ex->upgrade(handler_, req, ws_);
    });
    auto port = server_->listen();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    server_->start();
  }
  void TearDown() override {
    if (server_) server_->stop();
    // The handler holds its connection, whose session needs the server's
    // I/O context: it goes before the server does.
    handler_.reset();
    server_.reset();
  }
  std::unique_ptr<websocket::stream<tcp::socket>> connect(const std::string& origin = {}) {
    auto ws = std::make_unique<websocket::stream<tcp::socket>>(io_);
    ws->next_layer().connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port_));
    ws->set_option(websocket::stream_base::decorator([origin](websocket::request_type& r) {
      if (!origin.empty()) r.set(beast::http::field::origin, origin);
    }));
    ws->handshake("127.0.0.1:" + std::to_string(port_), "/ws");
    return ws;
  }

  net::io_context io_;
  WsOptions ws_;
  std::shared_ptr<Recorder> handler_;
  std::unique_ptr<Server> server_;
  uint16_t port_ = 0;
};

TEST_F(WebSocketTest, EchoesTextAndBinaryThenClosesNormally) {
  start({});
  auto ws = connect();
  ws->text(true);
  ws->write(net::buffer(std::string("hi")));
  beast::flat_buffer buf;
  ws->read(buf);
  EXPECT_TRUE(ws->got_text());
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "echo:hi");
  buf.consume(buf.size());
  ws->binary(true);
  std::string bytes("\x00\x01\xff", 3);
  ws->write(net::buffer(bytes));
  ws->read(buf);
  EXPECT_FALSE(ws->got_text());
  EXPECT_EQ(beast::buffers_to_string(buf.data()), bytes);
  ws->close(websocket::close_code::normal);
  EXPECT_EQ(handler_->wait_closed(), 1000);
}

TEST_F(WebSocketTest, AMessageOverTheLimitClosesWith1009) {
  WsOptions o;
  o.max_message_bytes = 64 * 1024;
  start(o);
  auto ws = connect();
  ws->binary(true);
  ws->write(net::buffer(std::string(64 * 1024, 'a')));  // at the limit: fine
  beast::flat_buffer buf;
  ws->read(buf);
  EXPECT_EQ(buf.size(), 64u * 1024);
  buf.consume(buf.size());
  beast::error_code ec;
  ws->write(net::buffer(std::string(64 * 1024 + 1, 'a')), ec);
  ws->read(buf, ec);
  EXPECT_EQ(ec, websocket::error::closed);
  EXPECT_EQ(ws->reason().code, 1009);
  EXPECT_EQ(handler_->wait_closed(), 1009);
}

TEST_F(WebSocketTest, BigSendsAreSplitIntoMessagesWithinTheLimit) {
  WsOptions o;
  o.max_message_bytes = 1000;
  start(o, false);
  auto ws = connect();
  handler_->conn()->send_binary(std::string(2500, 'x'));
  handler_->conn()->close(ws_close::kNormal, "bye");
  size_t total = 0, messages = 0;
  beast::flat_buffer buf;
  beast::error_code ec;
  while (!ec) {
    ws->read(buf, ec);
    if (ec) break;
    EXPECT_LE(buf.size(), 1000u);
    total += buf.size();
    ++messages;
    buf.consume(buf.size());
  }
  EXPECT_EQ(ec, websocket::error::closed);
  EXPECT_EQ(ws->reason().code, 1000);
  EXPECT_EQ(total, 2500u);
  EXPECT_EQ(messages, 3u);
}

TEST_F(WebSocketTest, AnIdleConnectionIsPinged) {
  WsOptions o;
  o.idle_timeout = std::chrono::milliseconds(400);
  start(o);
  auto ws = connect();
  std::atomic<int> pings{0};
  ws->control_callback([&](websocket::frame_type kind, beast::string_view) {
    if (kind == websocket::frame_type::ping) ++pings;
  });
  // The client's read answers pings (Beast pongs for it); the server keeps
  // pinging and the connection stays up while it does.
  auto stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  std::thread closer([&] {
    std::this_thread::sleep_until(stop_at);
    handler_->conn()->send_text("done");
  });
  beast::flat_buffer buf;
  ws->read(buf);
  closer.join();
  EXPECT_EQ(beast::buffers_to_string(buf.data()), "done");
  EXPECT_GE(pings.load(), 2);
  EXPECT_FALSE(handler_->conn()->closed());
}

TEST_F(WebSocketTest, AClientThatDoesNotReadIsDroppedWith1008) {
  WsOptions o;
  o.max_queued_bytes = 256 * 1024;
  start(o, false);
  auto ws = connect();
  auto conn = handler_->conn();
  // 64 MiB offered to a client that reads nothing: the socket buffers fill,
  // the queue passes its bound, the session ends.
  for (int i = 0; i < 1024 && !conn->closed(); ++i) conn->send_binary(std::string(64 * 1024, 'z'));
  EXPECT_EQ(handler_->wait_closed(), 1008);
}

TEST_F(WebSocketTest, ServerStopSays1001) {
  start({});
  auto ws = connect();
  (void)handler_->conn();
  std::thread stopper([&] { server_->stop(); });
  beast::flat_buffer buf;
  beast::error_code ec;
  ws->read(buf, ec);
  stopper.join();
  EXPECT_EQ(ec, websocket::error::closed);
  EXPECT_EQ(ws->reason().code, 1001);
}

TEST_F(WebSocketTest, OriginMustBeTheServersOwn) {
  start({});
  EXPECT_NO_THROW(connect("http://127.0.0.1:" + std::to_string(port_)));
  EXPECT_THROW(connect("http://evil.example:" + std::to_string(port_)),
               boost::system::system_error);
  EXPECT_THROW(connect("http://127.0.0.1:1"), boost::system::system_error);
}

TEST(WebSocketChecks, UpgradeAndOriginRules) {
  Request r;
  r.method = "GET";
  r.headers = {
      {"upgrade", "WebSocket"}, {"connection", "keep-alive, Upgrade"}, {"host", "localhost:8181"}};
  EXPECT_TRUE(is_websocket_upgrade(r));
  r.method = "POST";
  EXPECT_FALSE(is_websocket_upgrade(r));
  r.method = "GET";
  r.headers["connection"] = "keep-alive";
  EXPECT_FALSE(is_websocket_upgrade(r));
  r.headers["connection"] = "upgrade";
  EXPECT_TRUE(websocket_origin_ok(r));  // no Origin: not a browser
  r.headers["origin"] = "http://localhost:8181";
  EXPECT_TRUE(websocket_origin_ok(r));
  r.headers["origin"] = "http://localhost:8182";
  EXPECT_FALSE(websocket_origin_ok(r));
  r.headers["origin"] = "http://evil.com:8181";
  EXPECT_FALSE(websocket_origin_ok(r));
  r.headers["origin"] = "null";
  EXPECT_FALSE(websocket_origin_ok(r));
  // Behind a TLS proxy: Host without a port, the origin's scheme's default.
  r.headers["host"] = "example.com";
  r.headers["origin"] = "https://example.com";
  EXPECT_TRUE(websocket_origin_ok(r));
  r.headers["origin"] = "https://example.com:8443";
  EXPECT_FALSE(websocket_origin_ok(r));
  r.headers["host"] = "example.com:443";
  r.headers["origin"] = "http://example.com";
  EXPECT_FALSE(websocket_origin_ok(r));  // 80 is not 443
}

}  // namespace
}  // namespace sandcastle::transport::http
