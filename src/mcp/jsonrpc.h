// JSON-RPC 2.0 message shapes and the standard error codes, plus MCP's own.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/result.h"

namespace sandcastle::mcp {

using json = nlohmann::json;

namespace rpc_error {
inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// MCP: resource not found (legacy era).
inline constexpr int kResourceNotFound = -32002;
// MCP 2026-07-28.
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingRequiredClientCapability = -32021;
inline constexpr int kUnsupportedProtocolVersion = -32022;
}  // namespace rpc_error

// An error a handler raises to become a JSON-RPC error response.
struct RpcError {
  int code;
  std::string message;
  json data;  // null when absent
};

// The -32602 error a handler throws for a malformed request.
inline RpcError invalid_params(std::string message) {
  return RpcError{rpc_error::kInvalidParams, std::move(message), nullptr};
}

enum class MessageKind { kRequest, kNotification, kResponse, kInvalid };

// Classifies one parsed JSON value. For kInvalid, `why` says what is wrong and
// `id` is the request id when one could be recovered (else null).
// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's noexcept destructor may allocate
struct Classified {
  MessageKind kind = MessageKind::kInvalid;
  std::string why;
  json id;  // null when absent
};
Classified classify(const json& msg);

json make_result(const json& id, json result);
json make_error(const json& id, int code, const std::string& message, const json& data = nullptr);
json make_error(const json& id, const RpcError& err);
json make_notification(const std::string& method, json params);

// The answer to a message parse_json (common/json_parse.h) refused: -32600
// when it broke a limit (size, nesting, value count; the message names it),
// -32700 when it is not JSON.
json parse_failure(const json& id, const Error& why);

// Serialises without throwing on invalid UTF-8 in strings (replaced by U+FFFD):
// program output is arbitrary bytes and must never break the wire. A result
// made by preserialized() goes out as the text it holds.
std::string dump_message(const json& msg);

// A result already serialized (a memoized tools/list page): the reply holds
// it as {kPreserializedKey: text}, and dump_message splices the text in
// instead of serializing a large tree again.
inline constexpr const char* kPreserializedKey =
    "\x01"
    "sandcastle/preserialized";
json preserialized(std::string text);

}  // namespace sandcastle::mcp
