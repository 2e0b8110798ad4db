// An operation's arguments checked against its JSON Schema (the one the MCP
// tool publishes as inputSchema), with the schema's defaults filled in, so a
// face may pass a request body as it came.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/result.h"

namespace sandcastle::service {

// kInvalidArgument, worded as the MCP tool registry words it ("Invalid
// arguments for tool 'NAME': ...") so every face says the same.
Result<nlohmann::json> checked_args(std::string_view op, const nlohmann::json& schema,
                                    const nlohmann::json& args);

}  // namespace sandcastle::service
