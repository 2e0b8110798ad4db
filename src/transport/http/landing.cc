#include "transport/http/landing.h"

#include <nlohmann/json.hpp>

#include "transport/http/client_config.h"

namespace sandcastle::transport::http {

using ojson = nlohmann::ordered_json;

namespace {

// No scripts, styles only inline, nothing loaded, never framed.
constexpr const char* kPageCsp =
    "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'";

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Pretty for a person reading GET /; one line for an OAuth error, which
// clients quote inside their own message.
Response json_answer(int status, const ojson& body, int indent = -1) {
  Response r = Response::json(status, body.dump(indent) + "\n");
  add_page_security_headers(r.headers);
  return r;
}

Response landing(const Request& req, const LandingInfo& info) {
  std::string base = info.public_url;
  while (!base.empty() && base.back() == '/') base.pop_back();
  // The Host a request carries has passed the request-head grammar check and
  // the allowed-hosts check; it is still escaped wherever it is shown.
  if (base.empty() && !req.header("host").empty()) base = "http://" + req.header("host");
  ClientEndpoint ep{base + info.endpoint, info.auth_required, true};
  const std::string& accept = req.header("accept");
  if (accept.find("text/html") == std::string::npos) {
    ojson body{
        {"name", info.name},
        {"version", info.version},
        {"description", "MCP server that runs code in isolated Linux sandboxes"},
        {"mcp",
         {{"endpoint", info.endpoint}, {"url", ep.mcp_url}, {"transport", "Streamable HTTP"}}},
        {"legacy_sse", {{"endpoint", "/sse"}, {"transport", "HTTP+SSE (2024-11-05)"}}},
        {"health", "/healthz"},
        {"auth", info.auth_required ? api_key_hint() : "none: this server takes no API key"},
        {"clients", {{"http", http_client_config(ep)}, {"mcp_remote", bridge_client_config(ep)}}},
        {"docs",
         {{"readme", "README.md in the sandcastle sources (Quick start)"},
          {"mcp", "https://modelcontextprotocol.io/specification/"}}}};
    return json_answer(200, body, 2);
  }
  std::string h;
  h +=
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sandcastle</title>\n"
      "<style>body{font-family:system-ui,sans-serif;max-width:52em;margin:2em auto;padding:0 "
      "1em;line-height:1.45}"
      "pre{background:#f4f4f4;padding:.6em;overflow-x:auto}code{background:#f4f4f4}</style></"
      "head><body>\n";
  h += "<h1>sandcastle " + html_escape(info.version) + "</h1>\n";
  h += "<p>An MCP server that runs code in isolated Linux sandboxes. This is not a chat page: "
       "point an MCP "
       "client at <code>" +
       html_escape(ep.mcp_url) +
       "</code> (Streamable HTTP; the older HTTP+SSE transport "
       "is at <code>/sse</code>).</p>\n";
  if (info.auth_required)
    h += "<p><b>API key required.</b> " + html_escape(api_key_hint()) + "</p>\n";
  h += "<h2>Connect a client</h2>\n<p>Claude Code:</p><pre>" + html_escape(claude_add_http(ep)) +
       "</pre>\n";
  h += "<p>Cursor (<code>~/.cursor/mcp.json</code>), Claude Code "
       "(<code>.mcp.json</code>):</p><pre>" +
       html_escape(http_client_config(ep).dump(2)) + "</pre>\n";
  h += "<p>Claude Desktop (<code>claude_desktop_config.json</code>), through the mcp-remote "
       "bridge:</p><pre>" +
       html_escape(bridge_client_config(ep).dump(2)) + "</pre>\n";
  h += "<p>Health: <a href=\"/healthz\">/healthz</a>. Documentation: README.md in the sandcastle "
       "sources; the MCP "
       "specification at <a "
       "href=\"https://modelcontextprotocol.io/specification/\">modelcontextprotocol.io</a>."
       "</p>\n</body></html>\n";
  Response r = Response::text(200, std::move(h), "text/html; charset=utf-8");
  add_page_security_headers(r.headers);
  return r;
}

}  // namespace

std::string api_key_hint() {
  return "sandcastle takes an API key, not an OAuth sign-in: create one on the server with "
         "`sandcastle keys "
         "create --name <name>` and send it as the header 'Authorization: Bearer <key>' (or "
         "'X-API-Key: <key>', "
         "or ?api_key=<key> in the URL); with mcp-remote, pass --header 'Authorization: Bearer "
         "<key>'";
}

void add_page_security_headers(Headers& h) {
  h.emplace_back("X-Content-Type-Options", "nosniff");
  h.emplace_back("Content-Security-Policy", kPageCsp);
  h.emplace_back("X-Frame-Options", "DENY");
  h.emplace_back("Referrer-Policy", "no-referrer");
  h.emplace_back("Cache-Control", "no-store");
}

std::optional<Response> public_answer(const Request& req, const LandingInfo& info) {
  const std::string& p = req.path;
  if (p == "/" && req.method == "GET") return landing(req, info);
  // RFC 9728 and RFC 8414 / OpenID discovery, at the root or with the
  // resource's path appended: no such documents here. The error fields
  // follow RFC 6749 §5.2 so OAuth clients show the description.
  if (req.method == "GET" && (starts_with(p, "/.well-known/oauth-protected-resource") ||
                              starts_with(p, "/.well-known/oauth-authorization-server") ||
                              starts_with(p, "/.well-known/openid-configuration")))
    return json_answer(404,
                       ojson{{"error", "invalid_request"}, {"error_description", api_key_hint()}});
  // An OAuth client that found no metadata registers at /register and then
  // sends a browser to /authorize (the MCP specification's defaults). A 403
  // with the reason ends its attempt there: a 401 would restart the sign-in
  // and a 404 would make it retry over the other transport first.
  if ((p == "/register" && req.method == "POST") || (p == "/authorize" && req.method == "GET"))
    return json_answer(403,
                       ojson{{"error", "access_denied"}, {"error_description", api_key_hint()}});
  return std::nullopt;
}

}  // namespace sandcastle::transport::http
