// Multi-round-trip requests of the 2026-07-28 era (SEP-2322). That era has
// no server-to-client requests, so a handler that needs the client (an
// elicitation, a sampling, its roots) ends the round by throwing
// InputRequired: the client answers each input request and sends the
// original request again with `inputResponses` and the echoed
// `requestState`. The state is the handler's own (JSON); the server signs
// it, so a client can carry it but not forge or alter it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace sandcastle::mcp {

struct InputRequired {
  nlohmann::json input_requests = nlohmann::json::object();  // key -> {method, params}
  std::optional<nlohmann::json> state;                       // for the next round
};

// "<payload>.<mac>", both base64url; the MAC (HMAC-SHA256 under `key`) also
// covers the method, so a state from one request cannot be replayed on
// another kind.
std::string sign_request_state(const std::string& key, const std::string& method,
                               const nlohmann::json& state);
// The state, or nullopt when the text was altered, forged or malformed.
std::optional<nlohmann::json> verify_request_state(const std::string& key,
                                                   const std::string& method,
                                                   const std::string& text);

}  // namespace sandcastle::mcp
