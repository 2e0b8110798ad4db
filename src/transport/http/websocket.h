// WebSocket (RFC 6455) on the HTTP server: a handler that takes a request
// over calls Exchange::upgrade with a WsHandler. Bounded: a message from the
// client larger than max_message_bytes closes with 1009; a client that does
// not read while more than max_queued_bytes wait to be sent is closed with
// 1008; an idle connection is pinged, and one that answers nothing for
// idle_timeout is dropped. No compression (a compressed frame's size says
// nothing about what it inflates to).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

namespace ws_close {
inline constexpr uint16_t kNormal = 1000;
inline constexpr uint16_t kGoingAway = 1001;
inline constexpr uint16_t kProtocolError = 1002;
inline constexpr uint16_t kUnsupportedData = 1003;
inline constexpr uint16_t kPolicyViolation = 1008;
inline constexpr uint16_t kTooBig = 1009;
inline constexpr uint16_t kInternalError = 1011;
inline constexpr uint16_t kTryAgainLater = 1013;
}  // namespace ws_close

struct WsOptions {
  size_t max_message_bytes = size_t{64} * 1024;  // a frame or message from the client
  size_t max_queued_bytes = size_t{1} << 20;     // unsent data before the client is dropped
  // Half of it without traffic: a ping; all of it without an answer: closed.
  std::chrono::milliseconds idle_timeout{30'000};
  std::chrono::milliseconds handshake_timeout{10'000};
};

// The open connection, for its handler: thread-safe, calls after the close
// are ignored. Sends of more than max_message_bytes go out as several messages.
class WsConnection {
 public:
  virtual ~WsConnection() = default;
  virtual void send_text(std::string text) = 0;
  virtual void send_binary(std::string bytes) = 0;
  // Sends a close frame with the code (after what is queued) and ends.
  virtual void close(uint16_t code, std::string reason = {}) = 0;
  virtual bool closed() const = 0;
  // Bytes queued and not yet sent: a producer that can wait (a terminal's
  // pty) holds off while it is high instead of being dropped at the bound.
  virtual size_t queued() const = 0;
};

// Called on an I/O thread, one call at a time: keep them short (hand work off).
class WsHandler {
 public:
  virtual ~WsHandler() = default;
  virtual void on_open(std::shared_ptr<WsConnection> conn) = 0;
  virtual void on_text(std::string text) = 0;
  virtual void on_binary(std::string bytes) = 0;
  // Once, whatever ended it; `code` is the close code received or sent
  // (1006 when the connection just dropped).
  virtual void on_close(uint16_t code) = 0;
};

// True for a GET with Upgrade: websocket and Connection: upgrade.
bool is_websocket_upgrade(const Request& req);
// True when the request has no Origin (not a browser) or its Origin is this
// server as the browser reached it: same host and port as the Host field.
// A page elsewhere cannot open a WebSocket with the user's cookie.
bool websocket_origin_ok(const Request& req);

}  // namespace sandcastle::transport::http
