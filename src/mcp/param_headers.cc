#include "mcp/param_headers.h"

#include <algorithm>
#include <cctype>
#include <string_view>
#include <utility>

namespace sandcastle::mcp {

namespace {

// The parameters a router in front of sandcastle would route on: the sandbox
// a call acts on decides which host holds its state.
constexpr std::pair<const char*, const char*> kRoutingParams[] = {{"sandbox_id", "Sandbox-Id"}};

// RFC 9110 §5.6.2 tchar.
bool is_tchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A mark nested in a property's own properties: the one place a schema could
// hide one that the top-level scan would miss.
bool has_nested_mark(const json& schema) {
  if (!schema.is_object()) return false;
  auto props = schema.find("properties");
  if (props == schema.end() || !props->is_object()) return false;
  return std::any_of(props->begin(), props->end(), [](const json& p) {
    return (p.is_object() && p.contains(kHeaderMark)) || has_nested_mark(p);
  });
}

}  // namespace

void mark_routing_params(json& input_schema) {
  if (!input_schema.is_object() || !input_schema.contains("properties")) return;
  json& props = input_schema["properties"];
  if (!props.is_object()) return;
  for (const auto& [property, name] : kRoutingParams) {
    auto it = props.find(property);
    if (it == props.end() || !it->is_object() || it->contains(kHeaderMark)) continue;
    if (it->value("type", json()) != "string") continue;
    (*it)[kHeaderMark] = name;
  }
}

Result<std::vector<ParamHeader>> param_headers_of(const json& input_schema) {
  std::vector<ParamHeader> out;
  if (!input_schema.is_object()) return out;
  auto props = input_schema.find("properties");
  if (props == input_schema.end() || !props->is_object()) return out;
  auto bad = [](const std::string& property, const std::string& why) {
    return Error::make(ErrorCode::kInvalidArgument, "property '" + property + "': " + why);
  };
  for (const auto& [property, schema] : props->items()) {
    if (!schema.is_object()) continue;
    if (has_nested_mark(schema))
      return bad(property, "x-mcp-header is supported on top-level properties only");
    auto mark = schema.find(kHeaderMark);
    if (mark == schema.end()) continue;
    if (!mark->is_string() || mark->get_ref<const std::string&>().empty())
      return bad(property, "x-mcp-header must be a non-empty string");
    const std::string& name = mark->get_ref<const std::string&>();
    if (!std::all_of(name.begin(), name.end(), is_tchar))
      return bad(property, "x-mcp-header '" + name + "' is not an RFC 9110 token");
    std::string type =
        schema.value("type", json()).is_string() ? schema["type"].get<std::string>() : "";
    if (type != "string" && type != "integer" && type != "boolean")
      return bad(property,
                 "x-mcp-header needs type string, integer or boolean (not '" + type + "')");
    for (const auto& seen : out)
      if (lower(seen.name) == lower(name))
        return bad(property, "x-mcp-header '" + name + "' repeats '" + seen.name +
                                 "' of property '" + seen.property + "'");
    out.push_back(ParamHeader{property, name, type});
  }
  return out;
}

}  // namespace sandcastle::mcp
