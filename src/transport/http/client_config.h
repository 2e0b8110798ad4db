// What a user pastes into an MCP client to reach this server: the
// `{"mcpServers": {...}}` JSON that Claude Desktop, Claude Code and Cursor
// read, and the `claude mcp add` lines. Printed at start (stderr) and shown
// by GET / (landing.h), so both say the same thing.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace sandcastle::transport::http {

inline constexpr const char* kClientServerName = "sandcastle";
// What stands for the key in every snippet when keys are on.
inline constexpr const char* kKeyPlaceholder = "<your key>";

struct ClientEndpoint {
  std::string mcp_url;  // "http://127.0.0.1:8181/mcp"
  bool auth_required = false;
  bool loopback = true;  // mcp-remote refuses plain http elsewhere unless --allow-http
};

// {"mcpServers": {"sandcastle": {"type": "http", "url": ..., "headers": ...}}}
// (Claude Code's .mcp.json, Cursor's mcp.json).
nlohmann::ordered_json http_client_config(const ClientEndpoint& e);
// The same server through the mcp-remote stdio bridge (Claude Desktop's
// claude_desktop_config.json): {"command": "npx", "args": [...]}.
nlohmann::ordered_json bridge_client_config(const ClientEndpoint& e);
// A client that starts sandcastle itself over stdio.
nlohmann::ordered_json stdio_client_config(const std::string& binary);
// `claude mcp add --transport http sandcastle <url> [--header ...]`
std::string claude_add_http(const ClientEndpoint& e);
// `claude mcp add sandcastle -- <binary>`
std::string claude_add_stdio(const std::string& binary);

// The block printed after the listening line: every snippet above, one per
// line (each JSON document on a line of its own), and where the web page is.
// `binary` empty: no stdio snippets.
std::string startup_client_text(const ClientEndpoint& e, const std::string& base_url,
                                const std::string& binary);

// A word of a shell command line, quoted when it needs to be.
std::string shell_quote(const std::string& word);

}  // namespace sandcastle::transport::http
