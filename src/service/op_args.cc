#include "service/op_args.h"

#include "mcp/json_schema.h"

namespace sandcastle::service {

Result<nlohmann::json> checked_args(std::string_view op, const nlohmann::json& schema,
                                    const nlohmann::json& args) {
  nlohmann::json effective = args.is_null() ? nlohmann::json::object() : args;
  if (auto bad = mcp::validate_schema(schema, effective))
    return Error::make(ErrorCode::kInvalidArgument,
                       "Invalid arguments for tool '" + std::string(op) + "': " + bad->message() +
                           ". Fix the argument and call the tool again.");
  mcp::apply_defaults(schema, effective);
  return effective;
}

}  // namespace sandcastle::service
