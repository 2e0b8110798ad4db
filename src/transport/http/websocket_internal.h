// Between the HTTP server's connections and the WebSocket sessions they
// become (http_server.cc, websocket.cc).
#pragma once

#include <boost/beast/core.hpp>
#include <functional>
#include <memory>

#include "transport/http/websocket.h"

namespace sandcastle::transport::http::detail {

class WsControl {
 public:
  virtual ~WsControl() = default;
  // Server stop: a 1001 close, then the socket goes.
  virtual void going_away() = 0;
};

// Runs the handshake answering `req` on `stream` (its executor a strand),
// then the session; `on_end` runs once when the socket is closed.
std::shared_ptr<WsControl> start_websocket(boost::beast::tcp_stream stream, const Request& req,
                                           std::shared_ptr<WsHandler> handler, WsOptions options,
                                           std::function<void()> on_end);

}  // namespace sandcastle::transport::http::detail
