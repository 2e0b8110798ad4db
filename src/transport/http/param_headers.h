// The Mcp-Param-* headers of a POST checked against its tools/call (SEP-2243):
// a router may have acted on the header, the tool acts on the body, so the
// two must agree or the request is refused with -32020 (HTTP 400).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"
#include "mcp/jsonrpc.h"
#include "mcp/tool_registry.h"

namespace sandcastle::transport::http {

// Bounds on one request's Mcp-Param-* headers (the whole header block is
// bounded too: --max-header-bytes, 431).
inline constexpr size_t kMaxParamHeaders = 16;
inline constexpr size_t kMaxParamHeaderBytes = 1024;

// An Mcp-Param-* value as the client meant it: "=?base64?…?=" is decoded
// (canonical padded base64 of UTF-8 text), anything else is taken literally
// and must be printable ASCII (a client base64-encodes everything else).
Result<std::string> decode_param_value(std::string_view raw);

// Checks `headers` (lower-case names) against `message` when it is a
// tools/call of a tool in `tools`: the bounds above, each value's encoding,
// and each marked argument against its header. A header for an argument the
// body lacks disagrees with it. `required`: an argument in the body needs its
// header (2026-07-28, where clients must mirror); otherwise (2025 eras) an
// absent header passes. Returns why the request is refused, or nullopt.
std::optional<std::string> check_param_headers(const std::map<std::string, std::string>& headers,
                                               const mcp::ToolRegistry& tools,
                                               const mcp::json& message, bool required);

}  // namespace sandcastle::transport::http
