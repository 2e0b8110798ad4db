#include "transport/http/param_headers.h"

#include <cctype>
#include <charconv>
#include <cstdint>

#include "common/base64.h"
#include "common/text.h"
#include "common/utf8.h"
#include "mcp/param_headers.h"

namespace sandcastle::transport::http {

namespace {

constexpr std::string_view kPrefix = "=?base64?";
constexpr std::string_view kSuffix = "?=";

bool b64_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '+' || c == '/';
}

// Canonical base64: whole quads, padding only at the end and only as needed.
bool canonical_base64(std::string_view s) {
  if (s.size() % 4 != 0) return false;
  size_t pad = 0;
  while (pad < 2 && pad < s.size() && s[s.size() - 1 - pad] == '=') ++pad;
  for (size_t i = 0; i + pad < s.size(); ++i)
    if (!b64_char(s[i])) return false;
  return true;
}

template <class T>
bool parse_whole(std::string_view s, T& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

// A decimal as a header carries one: -?digits(.digits)?; no exponent, no '+'.
bool plain_decimal(std::string_view s) {
  if (!s.empty() && s.front() == '-') s.remove_prefix(1);
  auto dot = s.find('.');
  auto digits = [](std::string_view d) {
    return !d.empty() && d.find_first_not_of("0123456789") == std::string_view::npos;
  };
  return dot == std::string_view::npos ? digits(s)
                                       : digits(s.substr(0, dot)) && digits(s.substr(dot + 1));
}

// Does the header's value stand for the argument? Strings as they are,
// booleans as true/false, numbers by value (42 and 42.0 agree).
bool agrees(const mcp::json& arg, const std::string& value) {
  if (arg.is_string()) return arg.get_ref<const std::string&>() == value;
  if (arg.is_boolean()) return value == (arg.get<bool>() ? "true" : "false");
  if (!arg.is_number() || !plain_decimal(value)) return false;
  if (arg.is_number_integer() && value.find('.') == std::string::npos) {
    if (arg.is_number_unsigned()) {
      uint64_t v = 0;
      return parse_whole(value, v) && v == arg.get<uint64_t>();
    }
    int64_t v = 0;
    return parse_whole(value, v) && v == arg.get<int64_t>();
  }
  double v = 0;
  return parse_whole(value, v) && v == arg.get<double>();
}

}  // namespace

Result<std::string> decode_param_value(std::string_view raw) {
  if (raw.size() >= kPrefix.size() + kSuffix.size() && raw.substr(0, kPrefix.size()) == kPrefix &&
      raw.substr(raw.size() - kSuffix.size()) == kSuffix) {
    std::string_view payload =
        raw.substr(kPrefix.size(), raw.size() - kPrefix.size() - kSuffix.size());
    auto decoded = canonical_base64(payload) ? base64_decode(payload) : std::nullopt;
    if (!decoded)
      return Error::make(ErrorCode::kInvalidArgument, "invalid base64 in =?base64?...?=");
    if (!valid_utf8(*decoded))
      return Error::make(ErrorCode::kInvalidArgument,
                         "the base64 value does not decode to UTF-8 text");
    return std::move(*decoded);
  }
  for (char c : raw)
    if (c < 0x20 || c > 0x7e)
      return Error::make(
          ErrorCode::kInvalidArgument,
          "a character outside printable ASCII (send such a value as =?base64?...?=)");
  return std::string(raw);
}

std::optional<std::string> check_param_headers(const std::map<std::string, std::string>& headers,
                                               const mcp::ToolRegistry& tools,
                                               const mcp::json& message, bool required) {
  size_t count = 0;
  for (const auto& [name, value] : headers) {
    if (name.rfind("mcp-param-", 0) != 0) continue;
    if (++count > kMaxParamHeaders)
      return "more than " + std::to_string(kMaxParamHeaders) + " Mcp-Param-* headers";
    if (value.size() > kMaxParamHeaderBytes)
      return "the " + name + " header is over " + std::to_string(kMaxParamHeaderBytes) + " bytes";
  }
  if (count == 0 && !required) return std::nullopt;
  if (!message.is_object() || message.value("method", mcp::json()) != "tools/call")
    return std::nullopt;
  if (!message.contains("params")) return std::nullopt;
  const mcp::json& params = message["params"];
  if (!params.is_object() || !params.contains("name") || !params["name"].is_string())
    return std::nullopt;
  const mcp::ToolDefinition* def = tools.find(params["name"].get<std::string>());
  if (!def) return std::nullopt;  // the call fails on its own (-32602)
  auto marks = mcp::param_headers_of(def->input_schema);
  if (!marks.ok()) return std::nullopt;  // refused at registration: cannot happen
  // Pointers, not copies: arguments can be megabytes (write_file).
  const mcp::json* args = params.contains("arguments") ? &params["arguments"] : nullptr;
  for (const auto& mark : *marks) {
    const std::string header = "Mcp-Param-" + mark.name;
    const std::string where = "params.arguments." + mark.property;
    auto it = headers.find(ascii_lower(header));
    const mcp::json* arg = args && args->is_object() && args->contains(mark.property)
                               ? &(*args)[mark.property]
                               : nullptr;
    if (!arg || arg->is_null()) {
      if (it != headers.end())
        return "the " + header + " header is set but " + where + " is absent";
      continue;
    }
    if (it == headers.end()) {
      if (required)
        return "the " + header + " header is required (" + where + " is " + arg->dump() + ")";
      continue;
    }
    auto value = decode_param_value(it->second);
    if (!value.ok()) return "the " + header + " header is malformed: " + value.error().context;
    if (!agrees(*arg, *value))
      return header + " header '" + *value + "' does not match " + where + " " + arg->dump();
  }
  return std::nullopt;
}

}  // namespace sandcastle::transport::http
