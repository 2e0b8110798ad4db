// A small asynchronous HTTP/1.1 server on Boost.Asio/Beast. A few I/O threads
// serve every connection; a handler answers a request now or later (from any
// thread) through its Exchange, either with one response or with a stream of
// chunks (Server-Sent Events), so thousands of idle streams cost memory, not
// threads. Limits: request header size (431), body size (413), time to
// receive a whole request (408, then the connection closes), connection
// count. Request heads are checked as RFC 9112 requires (request_checks.h)
// before a handler sees them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/result.h"

namespace sandcastle::transport::http {

struct Request {
  std::string method;  // upper case: GET, POST, ...
  std::string target;  // path and query as sent (an absolute-form target reduced to them)
  std::string path;    // percent-decoded path
  std::map<std::string, std::string> query;  // percent-decoded; first value wins
  // Lower-case names; repeated ones joined by ", ". "host" is the one valid
  // Host field, or the authority of an absolute-form target.
  std::map<std::string, std::string> headers;
  std::string body;
  unsigned version = 11;  // 10 or 11
  std::string remote;     // peer address

  // The header's value, or "" when absent.
  const std::string& header(const std::string& lower_name) const;
  bool has_header(const std::string& lower_name) const { return headers.count(lower_name) != 0; }
};

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 200;
  Headers headers;
  std::string body;

  static Response text(int status, std::string body, std::string content_type = "text/plain; charset=utf-8");
  static Response json(int status, std::string body);
};

// The standard reason phrase for a status code ("Not Found").
const char* reason_phrase(int status);

class Connection;
class WsHandler;
struct WsOptions;

// One request's answer. Thread-safe; every call after the answer is complete
// (or after the client went away) is ignored.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Connection> conn, uint64_t generation);
  ~Exchange();

  // Sends one complete response.
  void respond(Response r);
  // Starts a streamed response (Transfer-Encoding: chunked on HTTP/1.1).
  void start_stream(int status, Headers headers);
  // Appends bytes to a started stream.
  void write(std::string data);
  // Ends a started stream; the connection then serves its next request.
  void finish();
  // Ends the exchange by closing the connection (used at shutdown).
  void abort();
  // Takes the connection over as a WebSocket (websocket.h): the handshake is
  // answered (101, or 400/426 for a bad one) and `handler` gets the session.
  // The caller has checked authentication and the Origin first.
  void upgrade(std::shared_ptr<WsHandler> handler, const Request& req, const WsOptions& options);
  // Runs `fn` once if the client disconnects before the answer is complete.
  // Runs at once when it already has.
  void on_close(std::function<void()> fn);
  bool closed() const { return closed_.load(); }
  bool started() const { return started_.load(); }

 private:
  friend class Connection;
  void fire_close();
  void drop_callbacks();

  std::shared_ptr<Connection> conn_;
  const uint64_t generation_;
  std::atomic<bool> started_{false};
  std::atomic<bool> done_{false};
  std::atomic<bool> closed_{false};
  std::mutex mu_;
  std::vector<std::function<void()>> on_close_;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8181;
  size_t threads = 2;
  size_t max_body_bytes = size_t{16} * 1024 * 1024;
  size_t max_header_bytes = size_t{16} * 1024;
  // A request must arrive whole (headers and body) within this time, else
  // 408 and close; an idle keep-alive connection is closed after it: a
  // slow-loris client holds a connection no longer than this.
  std::chrono::milliseconds request_timeout{10'000};
  // A stream whose client does not read is dropped once this much is queued.
  size_t max_queued_bytes = size_t{8} * 1024 * 1024;
  size_t max_connections = 15'000;
};

using Handler = std::function<void(Request&& req, std::shared_ptr<Exchange> ex)>;

class Server {
 public:
  Server(ServerOptions options, Handler handler);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens; returns the bound port (useful with port 0).
  Result<uint16_t> listen();
  // Starts the I/O threads; returns at once.
  void start();
  // Stops accepting new connections (in-flight exchanges continue).
  void stop_accepting();
  // Closes every connection and joins the I/O threads.
  void stop();

  size_t connections() const;
  const ServerOptions& options() const { return options_; }

  // Runs `fn` on an I/O thread after `delay` (timers for keep-alives etc.).
  void schedule(std::chrono::milliseconds delay, std::function<void()> fn);

  struct Impl;

 private:
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
};

// Percent-decodes; '+' stays '+' unless form is true.
std::string url_decode(std::string_view s, bool form = false);
std::string url_encode(std::string_view s);

}  // namespace sandcastle::transport::http
