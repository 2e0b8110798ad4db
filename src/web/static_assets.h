// Serves the web console compiled into the binary (embedded_assets.h):
//   GET /                      index.html, to a browser (Accept: text/html);
//                              programs asking for JSON get the landing JSON
//   GET /assets/<version>/<n>  the console's scripts, styles and the
//                              terminal emulator, cacheable for good
// Each answer has a strong ETag (If-None-Match → 304), is gzip-encoded when
// the client accepts it (inflated otherwise), and carries a strict CSP: the
// console's own scripts only, no inline script, no framing, no sniffing.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "transport/http/http_server.h"

namespace sandcastle::web {

// The console's Content-Security-Policy. Styles may be inline because the
// terminal emulator's renderer writes <style> elements; scripts may not.
// HTML results show in a sandboxed iframe (srcdoc, no allow-scripts), which
// inherits this policy.
inline constexpr const char* kConsoleCsp =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "frame-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// The answer for a console path (GET or HEAD; 405 for other methods on
// /assets/), or nullopt when the request is not for the console. Needs no
// key: the assets hold no data; the API behind them checks keys.
std::optional<transport::http::Response> answer(const transport::http::Request& req);

// The uncompressed bytes of an embedded asset ("run_result.html", the MCP
// App view for ui://sandcastle/run-result, text/html;profile=mcp-app), or
// nullopt when there is none by that name.
std::optional<std::string> asset_bytes(std::string_view name);

// True when an Accept-Encoding value admits gzip (RFC 9110 §12.5.3: a gzip
// or * coding whose q is not 0).
bool accepts_gzip(std::string_view accept_encoding);

}  // namespace sandcastle::web
