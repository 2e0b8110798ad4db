#include "mcp/input_required.h"

#include "common/base64.h"
#include "common/crypto.h"
#include "common/json_parse.h"
#include "mcp/jsonrpc.h"

namespace sandcastle::mcp {

namespace {

std::string mac_of(const std::string& key, const std::string& method, const std::string& payload) {
  return crypto::base64url(crypto::hmac_sha256(key, method + "\n" + payload));
}

}  // namespace

std::string sign_request_state(const std::string& key, const std::string& method,
                               const nlohmann::json& state) {
  const std::string payload = crypto::base64url(dump_message(state));
  return payload + "." + mac_of(key, method, payload);
}

std::optional<nlohmann::json> verify_request_state(const std::string& key,
                                                   const std::string& method,
                                                   const std::string& text) {
  const auto dot = text.find('.');
  if (dot == std::string::npos) return std::nullopt;
  const std::string payload = text.substr(0, dot);
  if (!crypto::constant_time_equal(text.substr(dot + 1), mac_of(key, method, payload)))
    return std::nullopt;
  auto raw = base64_decode(payload);
  if (!raw) return std::nullopt;
  // Our own signature vouches for it; bounded all the same, like all input.
  auto state = parse_json(*raw, JsonLimits{raw->size()});
  if (!state) return std::nullopt;
  return std::move(*state);
}

}  // namespace sandcastle::mcp
