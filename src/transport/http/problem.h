// RFC 9457 problem details: every REST error is
// `application/problem+json` {"type", "title", "status", "detail", "code"},
// where `code` is the error-code name MCP tool errors carry (result.h) or one
// of the HTTP-level names (unauthorized, forbidden, csrf, payload_too_large,
// unsupported_media_type, method_not_allowed, not_implemented).
#pragma once

#include <string>

#include "common/result.h"
#include "transport/http/http_server.h"

namespace sandcastle::transport::http {

inline constexpr const char* kProblemType = "application/problem+json";
inline constexpr const char* kProblemBase = "https://sandcastle.dev/problems/";

// A problem response; `code` is the machine-readable name.
Response problem(int status, const std::string& code, const std::string& detail);
// The problem for an Error, with the status its code maps to.
Response problem(const Error& e);
// The HTTP status for an error code (not_found → 404, invalid_argument → 400, ...).
int status_for(const Error& e);
// The code name a problem carries for an Error ("not_found"; a system error
// by its errno: ENOENT → not_found, EACCES/EPERM → permission_denied).
std::string problem_code(const Error& e);

}  // namespace sandcastle::transport::http
