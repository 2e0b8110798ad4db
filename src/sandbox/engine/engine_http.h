// One HTTP/1.1 exchange with an engine over a connection of its own (unix
// socket, TCP or TLS), run on a private io_context in the calling thread.
// The whole call has one deadline; a CancelToken ends it from any thread.
// Both close the connection, which ends every pending read and write.
// Internal to src/sandbox/engine/: callers use EngineClient.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/verb.hpp>
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "common/unique_fd.h"
#include "sandbox/engine/endpoint.h"
#include "sandbox/engine/engine_types.h"

namespace sandcastle::sandbox::engine {

struct HttpRequest {
  boost::beast::http::verb verb = boost::beast::http::verb::get;
  std::string target;  // origin form, query included
  std::string content_type;
  const std::string* body = nullptr;   // a body of known length, or
  const ByteSource* source = nullptr;  // one sent chunked until it returns 0
  bool upgrade = false;                // exec start: `Connection: Upgrade`, `Upgrade: tcp`
};

struct HttpHead {
  int status = 0;
  std::string reason;
};

class HttpCall {
 public:
  // `tls` must be set for a TLS endpoint; `cancel` may be null.
  HttpCall(const Endpoint& endpoint, boost::asio::ssl::context* tls,
           std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout,
           CancelToken* cancel);
  ~HttpCall();
  HttpCall(const HttpCall&) = delete;
  HttpCall& operator=(const HttpCall&) = delete;

  Status open();
  Status send(const HttpRequest& request);
  Result<HttpHead> read_head();
  // The body into *out; past `limit` bytes: kResourceExhausted, or with
  // `truncate` the first `limit` bytes and success (error pages).
  Status read_body(std::string* out, std::size_t limit, bool truncate = false);
  // The body to `sink`; past `limit` bytes: kResourceExhausted.
  Status read_body_to(const ByteSink& sink, std::size_t limit);
  // After read_head of an upgraded (hijacked) response: the raw duplex
  // stream. Writes `in` (if any) until it returns 0, then half-closes the
  // sending side (stdin's EOF), while every received byte goes to `out`,
  // until the engine closes the stream.
  Status duplex(const ByteSource* in, const ByteSink& out);

  // The same stream step by step, for a long-lived exec (ExecSession).
  // The bytes the header read took past the header (once).
  std::string take_buffered();
  Status write_all(std::string_view data, std::chrono::milliseconds timeout);
  // Up to `cap` bytes, 0 at the end of the stream. Past `timeout` without
  // a byte: kTimeout, and the stream stays usable.
  Result<std::size_t> read_some(char* buf, std::size_t cap, std::chrono::milliseconds timeout);
  Status shutdown_send();
  // The upgraded stream as a plain descriptor of the caller's (a dup;
  // O_CLOEXEC, blocking), for a relay that polls it with others. Unix and
  // TCP only: a TLS stream's bytes are not the socket's (kUnavailable).
  Result<int> dup_stream_fd();
  bool is_tls() const { return endpoint_.tls; }

  // For a stream dup_stream_fd cannot hand on (TLS): moves bytes both ways
  // between the upgraded stream and `local` (a SOCK_STREAM socket of the
  // caller's), in the calling thread, until both directions ended: one read
  // and one write in flight per direction, each through a fixed buffer (a
  // slow side stops the other's reads). `local`'s EOF half-closes the
  // stream towards the engine (the process's stdin EOF); the engine's EOF
  // half-closes `local`; an error on either side closes both. The call's
  // deadline and cancel token no longer apply (forget_cancel first).
  Status relay(UniqueFd local);
  // Ends a relay (or any call) from any thread: both sides closed.
  void stop();
  // Detaches the CancelToken given at construction (which may not outlive
  // this call's new owner).
  void forget_cancel();

  // "engine unix:///x.sock: POST /v1.41/exec/1/start" for error messages.
  std::string what() const;

 private:
  using UnixSocket = boost::asio::local::stream_protocol::socket;
  using TcpSocket = boost::asio::ip::tcp::socket;
  using TlsStream = boost::asio::ssl::stream<TcpSocket>;

  template <typename Start>
  boost::system::error_code run(Start&& start);
  template <typename Start>
  boost::system::error_code run_within(std::chrono::milliseconds timeout, Start&& start);
  template <typename F>
  auto with_stream(F&& f);
  void close_now();
  Error io_error(const char* doing, const boost::system::error_code& ec) const;
  Status connect_tcp();
  template <typename Start>
  boost::system::error_code connect_within(Start&& start);
  Error connect_error(const boost::system::error_code& ec) const;

  const Endpoint& endpoint_;
  boost::asio::ssl::context* tls_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds connect_timeout_;
  CancelToken* cancel_;
  std::string request_line_;

  boost::asio::io_context ioc_{1};
  boost::asio::steady_timer deadline_{ioc_};
  std::variant<std::monostate, UnixSocket, TcpSocket, std::unique_ptr<TlsStream>> stream_;
  std::optional<UnixSocket> local_;  // relay's other side
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::response_parser<boost::beast::http::buffer_body>> parser_;
  bool timed_out_ = false;
  bool cancelled_ = false;
  bool closed_ = false;
  bool connecting_ = false;
  bool connect_timed_out_ = false;
  bool in_op_ = false;  // a read_some/write_all with its own timeout runs
  bool op_timed_out_ = false;
};

}  // namespace sandcastle::sandbox::engine
