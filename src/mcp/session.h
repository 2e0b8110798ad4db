// One client connection: the legacy handshake state, requests in flight and
// their cancellation, and the dispatch of every incoming message.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "mcp/jsonrpc.h"
#include "mcp/server.h"

namespace sandcastle::mcp {

class Session : public std::enable_shared_from_this<Session> {
 public:
  using Send = std::function<void(const json&)>;

  // `send` must be thread-safe and write each message whole. `owner` is who
  // the session acts for (see RequestContext::owner).
  static std::shared_ptr<Session> create(const Server& server, Send send, std::string owner = {});
  // Like create, but every message a request causes (its reply, progress, log
  // messages, requests to the client) names that request's id, so a transport
  // with one response stream per request (Streamable HTTP) can route it.
  // Messages tied to no request come with nullptr. `close_stream`, when set,
  // is how a handler's RequestContext::close_stream ends the stream of the
  // request with that id (SSE polling); it is a call, never a message.
  using RoutedSend = std::function<void(const json& msg, const json* related_id)>;
  using CloseStream = std::function<void(const json& related_id)>;
  static std::shared_ptr<Session> create_routed(const Server& server, RoutedSend send,
                                                std::string owner = {}, CloseStream close_stream = {});
  const std::string& owner() const { return owner_; }

  // Parses one complete message (a line on stdio, a body over HTTP) and
  // handles it; every reply goes through `send`.
  void handle_text(std::string_view text);
  void handle_json(const json& msg);
  // Where a request that may block (a tool call) runs. handle_json(msg)
  // submits it to the shared ElasticPool; a transport that reads on a thread
  // it can hand over (stdio) passes a Runner that keeps it, to run it on the
  // reading thread once another has taken over reading (no hand-off to a
  // pool thread on the request's path).
  using Runner = std::function<void(std::function<void()>)>;
  void handle_json(const json& msg, const Runner& run);

  // Lets requests in flight run for up to `finish`, then cancels the rest and
  // waits up to `cancel` for their handlers to return. New requests arriving
  // meanwhile start cancelled. Returns true when none is left running.
  bool shutdown(std::chrono::milliseconds finish, std::chrono::milliseconds cancel);

  size_t inflight() const;
  std::string negotiated_version() const;
  // The capabilities the client declared in initialize (legacy era).
  json client_capabilities() const;

 private:
  struct Inflight {
    CancelToken token;
  };
  struct Envelope {
    Era era = Era::kLegacy;
    std::string version;
    int log_rank = -1;
    std::optional<json> progress_token;
  };

  Session(const Server& server, Send send, std::string owner)
      : server_(server), send_(std::move(send)), owner_(std::move(owner)) {}

  void handle_batch(const json& batch);
  void handle_notification(const json& msg);
  void handle_request(const json& msg, const Runner* run);
  // Runs a request to completion; nullopt when it was cancelled (no reply).
  std::optional<json> process_request(const json& msg, CancelToken* token);
  json dispatch(const std::string& method, const json& params, const Envelope& env,
                CancelToken* token, const json& id);
  Envelope envelope_for(const std::string& method, const json& params) const;
  json initialize(const json& params);
  json finish_modern(json result, const MethodSpec* spec) const;

  std::shared_ptr<Inflight> begin_inflight(const json& id);
  void end_inflight(const json& id);
  void emit(const json& msg, const json* related) const;
  // Sends a request to the client on behalf of request `related` and waits
  // for its response (server-to-client requests: sampling, elicitation).
  json request_client(const std::string& method, json params, const json& related,
                      CancelToken* token, std::chrono::milliseconds timeout);
  void handle_response(const json& msg);

  struct Outgoing {
    std::mutex mu;
    std::condition_variable cv;
    std::optional<json> response;
  };

  const Server& server_;
  Send send_;
  RoutedSend routed_;  // set by create_routed; then send_ forwards to it
  CloseStream close_stream_;
  const std::string owner_;

  mutable std::mutex mu_;
  std::condition_variable idle_cv_;
  bool initialized_ = false;
  bool cancelling_ = false;  // shutdown reached its cancel phase
  std::string negotiated_version_;
  int legacy_log_rank_ = -1;  // set from server options on initialize
  std::map<std::string, std::shared_ptr<Inflight>> inflight_;  // by id.dump()
  size_t running_ = 0;
  json client_capabilities_ = json::object();
  std::map<std::string, std::shared_ptr<Outgoing>> outgoing_;  // by id
  uint64_t next_outgoing_id_ = 1;
};

}  // namespace sandcastle::mcp
