#include "transport/http/client_config.h"

namespace sandcastle::transport::http {

using ojson = nlohmann::ordered_json;

namespace {

std::string bearer() {
  return std::string("Bearer ") + kKeyPlaceholder;
}

ojson servers(ojson entry) {
  return ojson{{"mcpServers", ojson{{kClientServerName, std::move(entry)}}}};
}

}  // namespace

std::string shell_quote(const std::string& word) {
  bool plain = !word.empty();
  for (char c : word)
    if (!(std::isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("@%+=:,./-_").find(c) != std::string_view::npos))
      plain = false;
  if (plain) return word;
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

ojson http_client_config(const ClientEndpoint& e) {
  ojson entry{{"type", "http"}, {"url", e.mcp_url}};
  if (e.auth_required) entry["headers"] = ojson{{"Authorization", bearer()}};
  return servers(std::move(entry));
}

ojson bridge_client_config(const ClientEndpoint& e) {
  ojson args = ojson::array({"-y", "mcp-remote", e.mcp_url});
  if (!e.loopback) args.push_back("--allow-http");
  if (e.auth_required) {
    args.push_back("--header");
    args.push_back("Authorization: " + bearer());
  }
  return servers(ojson{{"command", "npx"}, {"args", std::move(args)}});
}

ojson stdio_client_config(const std::string& binary) {
  return servers(ojson{{"command", binary}});
}

std::string claude_add_http(const ClientEndpoint& e) {
  std::string out = "claude mcp add --transport http " + std::string(kClientServerName) + " " +
                    shell_quote(e.mcp_url);
  if (e.auth_required) out += " --header " + shell_quote("Authorization: " + bearer());
  return out;
}

std::string claude_add_stdio(const std::string& binary) {
  return "claude mcp add " + std::string(kClientServerName) + " -- " + shell_quote(binary);
}

std::string startup_client_text(const ClientEndpoint& e, const std::string& base_url,
                                const std::string& binary) {
  // JSON with a space after ':' and ',' reads like the clients' own docs and
  // stays one line, so a script (and a test) can take each document whole.
  auto line = [](const ojson& j) {
    std::string s = j.dump();
    std::string out;
    bool in_string = false, escaped = false;
    for (char c : s) {
      out += c;
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == ':' || c == ',') {
        out += ' ';
      }
    }
    return out;
  };
  std::string t;
  t += "\nConnect an MCP client to this server (paste one):\n";
  if (e.auth_required)
    t += "  (keys are on: replace " + std::string(kKeyPlaceholder) +
         " with a key from `sandcastle keys create --name laptop`)\n";
  t += "  Claude Code:\n    " + claude_add_http(e) + "\n";
  t += "  Cursor (~/.cursor/mcp.json), Claude Code (.mcp.json):\n    " +
       line(http_client_config(e)) + "\n";
  t += "  Claude Desktop (claude_desktop_config.json), through the mcp-remote bridge:\n    " +
       line(bridge_client_config(e)) + "\n";
  if (!binary.empty()) {
    t += "Or let the client start sandcastle itself over stdio (no server needed):\n";
    t += "    " + line(stdio_client_config(binary)) + "\n";
    t += "    " + claude_add_stdio(binary) + "\n";
  }
  t += "In a browser: " + base_url + "/ opens the web console; health at " + base_url + "/healthz\n";
  return t;
}

}  // namespace sandcastle::transport::http
