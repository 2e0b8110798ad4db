// What a request handler may do while it runs: report progress, log to the
// client, and notice (or be woken by) cancellation.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/cancel_token.h"
#include "mcp/jsonrpc.h"
#include "mcp/protocol.h"

namespace sandcastle::mcp {

class RequestContext {
 public:
  using Send = std::function<void(const json&)>;

  RequestContext(Send send, json request_id, std::optional<json> progress_token, Era era,
                 std::string protocol_version, int min_log_rank, CancelToken* cancel,
                 std::string owner = {});

  const json& request_id() const { return request_id_; }
  Era era() const { return era_; }
  const std::string& protocol_version() const { return protocol_version_; }
  // Who the request acts for: the API key's owner over HTTP, "" for the local
  // stdio user. Sandboxes are visible only to their owner.
  const std::string& owner() const { return owner_; }
  bool cancelled() const { return cancel_ && cancel_->cancelled(); }
  CancelToken* cancel_token() const { return cancel_; }
  // Keeps `obj` until this request has been answered (see CancelToken::keep).
  void keep_until_answered(std::shared_ptr<void> obj) const {
    if (cancel_) cancel_->keep(std::move(obj));
  }
  bool wants_progress() const { return progress_token_.has_value(); }
  const std::optional<json>& progress_token() const { return progress_token_; }
  int min_log_rank() const { return min_log_rank_; }
  // Sends messages tied to no request, and stays valid after this one is
  // answered (a task's work goes on): to the connection while it lasts.
  void set_detached_send(Send s) { detached_send_ = std::move(s); }
  const Send& detached_send() const { return detached_send_; }

  // Sends notifications/progress when the request carried a progressToken.
  // Progress must increase: a value not above the last one sent is dropped.
  void progress(double progress, std::optional<double> total = std::nullopt,
                const std::string& message = {});
  // Sends a notification tied to this request (on HTTP, on its stream).
  void notify(const std::string& method, json params);

  // Sends notifications/message when the level passes the client's threshold
  // (logging/setLevel in the legacy era, the request's logLevel in the modern).
  void log(const std::string& level, const json& data, const std::string& logger = "sandcastle");
  bool log_enabled(const std::string& level) const;

  // Sends a request to the client (sampling/createMessage, elicitation/create,
  // roots/list) and waits for its result. Throws RpcError when the client
  // answers with an error, does not answer in time, the request is cancelled,
  // or the era has no server-to-client requests (2026-07-28).
  using Requester = std::function<json(const std::string& method, json params,
                                       std::chrono::milliseconds timeout)>;
  void set_requester(Requester r) { requester_ = std::move(r); }
  json request(const std::string& method, json params,
               std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // 2026-07-28 multi-round-trip requests (mcp/input_required.h): the
  // client's answers to the previous round's input requests (an object, or
  // null in the first round) and that round's state, verified.
  void set_input_round(json responses, std::optional<json> state) {
    input_responses_ = std::move(responses);
    request_state_ = std::move(state);
  }
  const json& input_responses() const { return input_responses_; }
  const std::optional<json>& request_state() const { return request_state_; }

  // What the client declared: initialize's capabilities, or the modern _meta's.
  void set_client_capabilities(json caps) { client_caps_ = std::move(caps); }
  const json& client_capabilities() const { return client_caps_; }

  // Over Streamable HTTP: ends the SSE stream carrying this request's
  // messages now (the client reconnects with Last-Event-ID and receives the
  // rest: SSE polling, SEP-1699). A no-op on other transports.
  void set_stream_closer(std::function<void()> fn) { stream_closer_ = std::move(fn); }
  void close_stream() {
    if (stream_closer_) stream_closer_();
  }

 private:
  Send send_;
  Send detached_send_;
  json request_id_;
  json input_responses_;
  std::optional<json> request_state_;
  std::optional<json> progress_token_;
  Era era_;
  std::string protocol_version_;
  int min_log_rank_;  // -1: logging off for this request
  CancelToken* cancel_;
  std::string owner_;
  Requester requester_;
  std::function<void()> stream_closer_;
  json client_caps_ = json::object();
  std::mutex progress_mu_;
  std::optional<double> last_progress_;
};

}  // namespace sandcastle::mcp
