// The pieces of the seeds' input schemas their profiles share: the seeds
// are FastMCP servers, whose schemas are plain objects of named arguments.
#pragma once

#include <nlohmann/json.hpp>
#include <utility>

namespace sandcastle::tools::profiles {

inline nlohmann::json string_arg(const char* description) {
  return nlohmann::json{{"type", "string"}, {"description", description}};
}

// `closed`: no arguments but these (FastMCP itself ignores extra ones).
inline nlohmann::json object_schema(nlohmann::json properties, nlohmann::json required,
                                    bool closed = false) {
  if (required.is_null()) required = nlohmann::json::array();  // `{}`: none
  nlohmann::json s{
      {"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
  if (closed) s["additionalProperties"] = false;
  return s;
}

}  // namespace sandcastle::tools::profiles
