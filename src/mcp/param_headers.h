// SEP-2243 custom headers: a tool's inputSchema marks the parameters routing
// layers need with "x-mcp-header", and Streamable HTTP clients mirror their
// values as Mcp-Param-{name} headers. The marks and their rules live here, so
// every tool gets them at registration; the transport's check against the
// body is transport/http/param_headers.h.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "mcp/jsonrpc.h"

namespace sandcastle::mcp {

inline constexpr const char* kHeaderMark = "x-mcp-header";

struct ParamHeader {
  std::string property;  // a top-level property of the inputSchema
  std::string name;      // the mark: the header is Mcp-Param-{name}
  std::string type;      // string, integer or boolean
};

// Marks the routing parameters sandcastle has (sandbox_id, as Sandbox-Id)
// wherever a schema has one as a top-level string; a mark already there stays.
void mark_routing_params(json& input_schema);

// The schema's marks, or what breaks SEP-2243's rules: a name that is empty
// or not an RFC 9110 token, two names equal but for case, a type other than
// string, integer or boolean, or a mark below the top level (which
// sandcastle's check does not follow).
Result<std::vector<ParamHeader>> param_headers_of(const json& input_schema);

}  // namespace sandcastle::mcp
