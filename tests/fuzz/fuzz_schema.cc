// Fuzzes argument validation: any JSON value against the schemas tools use
// (types, bounds, enums, patterns, nested objects, arrays, $ref).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "mcp/json_schema.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nlohmann::json;
  static const json kSchema = json::parse(R"({
    "type": "object",
    "$defs": {"limits": {"type": "object", "properties": {
      "memory_mb": {"type": "integer", "minimum": 16, "maximum": 65536},
      "cpus": {"type": "number", "exclusiveMinimum": 0}}, "additionalProperties": false}},
    "properties": {
      "code": {"type": "string", "minLength": 1, "maxLength": 100000},
      "language": {"type": "string", "enum": ["python", "javascript"]},
      "name": {"type": "string", "pattern": "^[a-z][a-z0-9-]{0,30}$"},
      "packages": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 5},
      "env": {"type": "object", "additionalProperties": {"type": "string"}},
      "limits": {"$ref": "#/$defs/limits"},
      "stdin": {"type": ["string", "null"]},
      "mode": {"anyOf": [{"const": "a"}, {"type": "integer"}]}
    },
    "required": ["code"],
    "additionalProperties": false
  })");
  json value = json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return 0;
  auto bad = sandcastle::mcp::validate_schema(kSchema, value);
  if (bad && bad->message().empty()) std::abort();
  if (!bad) sandcastle::mcp::apply_defaults(kSchema, value);
  return 0;
}
