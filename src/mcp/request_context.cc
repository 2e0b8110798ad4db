#include "mcp/request_context.h"

namespace sandcastle::mcp {

RequestContext::RequestContext(Send send, json request_id, std::optional<json> progress_token,
                               Era era, std::string protocol_version, int min_log_rank,
                               CancelToken* cancel, std::string owner)
    : send_(std::move(send)),
      request_id_(std::move(request_id)),
      progress_token_(std::move(progress_token)),
      era_(era),
      protocol_version_(std::move(protocol_version)),
      min_log_rank_(min_log_rank),
      cancel_(cancel),
      owner_(std::move(owner)) {}

void RequestContext::progress(double progress, std::optional<double> total,
                              const std::string& message) {
  if (!progress_token_ || cancelled()) return;
  std::lock_guard lock(progress_mu_);
  if (last_progress_ && progress <= *last_progress_) return;
  last_progress_ = progress;
  json params{{"progressToken", *progress_token_}, {"progress", progress}};
  if (total) params["total"] = *total;
  // `message` arrived in 2025-03-26; older clients would reject the field.
  if (!message.empty() &&
      (era_ == Era::kModern || version_at_least(protocol_version_, "2025-03-26")))
    params["message"] = message;
  send_(make_notification("notifications/progress", std::move(params)));
}

void RequestContext::notify(const std::string& method, json params) {
  send_(make_notification(method, std::move(params)));
}

json RequestContext::request(const std::string& method, json params,
                             std::chrono::milliseconds timeout) {
  if (!requester_)
    throw RpcError{rpc_error::kInternalError,
                   "this request cannot ask the client (" + method +
                       "): the 2026-07-28 protocol has no server-to-client requests",
                   nullptr};
  return requester_(method, std::move(params), timeout);
}

bool RequestContext::log_enabled(const std::string& level) const {
  int rank = log_level_rank(level);
  return min_log_rank_ >= 0 && rank >= min_log_rank_;
}

void RequestContext::log(const std::string& level, const json& data, const std::string& logger) {
  if (!log_enabled(level) || cancelled()) return;
  send_(make_notification("notifications/message",
                          json{{"level", level}, {"logger", logger}, {"data", data}}));
}

}  // namespace sandcastle::mcp
