// Answers for people and OAuth clients that arrive without knowing what this
// server is: GET / (a small page, or JSON for programs) naming the MCP
// endpoints and how to connect, and the OAuth discovery paths an MCP client
// probes after a 401. sandcastle takes API keys, not OAuth: those paths say
// so, with a status that ends the client's sign-in attempt at once instead
// of leaving it waiting for a browser that never comes back.
#pragma once

#include <optional>
#include <string>

#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

struct LandingInfo {
  std::string name = "sandcastle";
  std::string version;
  std::string endpoint = "/mcp";
  std::string public_url;  // base URL to show; empty: http://<Host of the request>
  bool auth_required = false;
};

// What a client without a key is told (401 bodies, the OAuth paths).
std::string api_key_hint();

// The answer to a public path (GET /, the OAuth discovery documents, the
// OAuth registration endpoint), or nullopt for any other request. Needs no
// key; the caller has checked Host and Origin.
std::optional<Response> public_answer(const Request& req, const LandingInfo& info);

// Headers every page-like answer carries: no sniffing, no scripts, no
// framing, no Referer, no caching.
void add_page_security_headers(Headers& h);

}  // namespace sandcastle::transport::http
