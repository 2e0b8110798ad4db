// Validates tool arguments against the subset of JSON Schema (2020-12) that
// tool input schemas use: type, properties, required, additionalProperties,
// items, enum, const, numeric and length bounds, pattern, anyOf/oneOf.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace sandcastle::mcp {

struct SchemaViolation {
  std::string path;      // "limits.memory_mb", "packages[2]", "" for the root
  std::string expected;  // "an integer >= 1", "one of: pip, npm", "present"
  std::string message() const;
};

// Returns the first violation, or nullopt when `value` conforms.
std::optional<SchemaViolation> validate_schema(const nlohmann::json& schema,
                                               const nlohmann::json& value);

// Fills in `default` values for absent top-level properties (and nested objects),
// so handlers see every documented default.
void apply_defaults(const nlohmann::json& schema, nlohmann::json& value);

}  // namespace sandcastle::mcp
