#include "mcp/json_schema.h"

#include <algorithm>
#include <regex>

namespace sandcastle::mcp {

using json = nlohmann::json;

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    default: return "a value";
  }
}

bool is_integral(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return d == static_cast<double>(static_cast<long long>(d));
}

bool matches_type(const std::string& t, const json& v) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "integer") return is_integral(v);
  if (t == "number") return v.is_number();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  return true;
}

std::string article(const std::string& t) {
  if (t == "integer" || t == "object" || t == "array") return "an " + t;
  return "a " + t;
}

std::string join_path(const std::string& base, const std::string& key) {
  return base.empty() ? key : base + "." + key;
}

// The document $ref pointers resolve against, and how deep refs have nested
// (a self-referencing schema must not recurse forever).
struct Ctx {
  const json& root;
  int depth = 0;
};

std::optional<SchemaViolation> check(const json& schema, const json& v, const std::string& path,
                                     Ctx& ctx);

std::optional<SchemaViolation> check_type(const json& schema, const json& v,
                                          const std::string& path) {
  auto t = schema.find("type");
  if (t == schema.end()) return std::nullopt;
  if (t->is_string()) {
    if (!matches_type(*t, v))
      return SchemaViolation{path, article(*t) + ", got " + type_name(v)};
  } else if (t->is_array()) {
    std::string names;
    for (const auto& one : *t) {
      if (matches_type(one.get<std::string>(), v)) return std::nullopt;
      names += (names.empty() ? "" : " or ") + article(one.get<std::string>());
    }
    return SchemaViolation{path, names + ", got " + type_name(v)};
  }
  return std::nullopt;
}

std::optional<SchemaViolation> check_object(const json& schema, const json& v,
                                            const std::string& path, Ctx& ctx) {
  if (auto req = schema.find("required"); req != schema.end()) {
    for (const auto& name : *req) {
      if (!v.contains(name.get<std::string>()))
        return SchemaViolation{join_path(path, name.get<std::string>()), "present (required)"};
    }
  }
  auto found = schema.find("properties");
  const json* props = found != schema.end() && found->is_object() ? &*found : nullptr;
  auto additional = schema.find("additionalProperties");
  for (const auto& [key, val] : v.items()) {
    auto prop = props ? props->find(key) : json::const_iterator{};
    if (props && prop != props->end()) {
      if (auto bad = check(*prop, val, join_path(path, key), ctx)) return bad;
    } else if (additional != schema.end()) {
      if (additional->is_boolean() && !additional->get<bool>()) {
        std::string known;
        if (props)
          for (const auto& [k, _] : props->items()) known += (known.empty() ? "" : ", ") + k;
        return SchemaViolation{join_path(path, key),
                               "absent: unknown property (known: " + known + ")"};
      }
      if (additional->is_object())
        if (auto bad = check(*additional, val, join_path(path, key), ctx)) return bad;
    }
  }
  return std::nullopt;
}

std::optional<SchemaViolation> check_bounds(const json& schema, const json& v,
                                            const std::string& path, Ctx& ctx) {
  if (v.is_number()) {
    double d = v.get<double>();
    if (auto m = schema.find("minimum"); m != schema.end() && d < m->get<double>())
      return SchemaViolation{path, ">= " + m->dump() + ", got " + v.dump()};
    if (auto m = schema.find("maximum"); m != schema.end() && d > m->get<double>())
      return SchemaViolation{path, "<= " + m->dump() + ", got " + v.dump()};
    if (auto m = schema.find("exclusiveMinimum"); m != schema.end() && d <= m->get<double>())
      return SchemaViolation{path, "> " + m->dump() + ", got " + v.dump()};
    if (auto m = schema.find("exclusiveMaximum"); m != schema.end() && d >= m->get<double>())
      return SchemaViolation{path, "< " + m->dump() + ", got " + v.dump()};
  }
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    if (auto m = schema.find("minLength"); m != schema.end() && s.size() < m->get<size_t>())
      return SchemaViolation{path, "a string of at least " + m->dump() + " characters"};
    if (auto m = schema.find("maxLength"); m != schema.end() && s.size() > m->get<size_t>())
      return SchemaViolation{path, "a string of at most " + m->dump() + " characters"};
    if (auto p = schema.find("pattern"); p != schema.end()) {
      std::regex re(p->get<std::string>(), std::regex::ECMAScript);
      if (!std::regex_search(s, re))
        return SchemaViolation{path, "a string matching " + p->get<std::string>()};
    }
  }
  if (v.is_array()) {
    if (auto m = schema.find("minItems"); m != schema.end() && v.size() < m->get<size_t>())
      return SchemaViolation{path, "an array of at least " + m->dump() + " items"};
    if (auto m = schema.find("maxItems"); m != schema.end() && v.size() > m->get<size_t>())
      return SchemaViolation{path, "an array of at most " + m->dump() + " items"};
    if (auto items = schema.find("items"); items != schema.end() && items->is_object()) {
      for (size_t i = 0; i < v.size(); ++i)
        if (auto bad = check(*items, v[i], path + "[" + std::to_string(i) + "]", ctx)) return bad;
    }
  }
  return std::nullopt;
}

std::optional<SchemaViolation> check(const json& schema, const json& v, const std::string& path,
                                     Ctx& ctx) {
  if (!schema.is_object()) return std::nullopt;  // `true` / `{}` accept anything
  if (auto ref = schema.find("$ref"); ref != schema.end() && ref->is_string()) {
    // Only local refs ("#/$defs/x"): tool schemas are self-contained.
    const std::string& r = ref->get_ref<const std::string&>();
    if (r.rfind("#", 0) == 0 && ctx.depth < 32) {
      try {
        const json& target = ctx.root.at(json::json_pointer(r.substr(1)));
        ++ctx.depth;
        auto bad = check(target, v, path, ctx);
        --ctx.depth;
        if (bad) return bad;
      } catch (const json::exception&) {
        // An unresolvable ref constrains nothing; the schema author is told in tests.
      }
    }
  }
  if (auto bad = check_type(schema, v, path)) return bad;
  if (auto e = schema.find("enum"); e != schema.end()) {
    if (std::find(e->begin(), e->end(), v) == e->end()) {
      std::string options;
      for (const auto& opt : *e)
        options +=
            (options.empty() ? "" : ", ") + (opt.is_string() ? opt.get<std::string>() : opt.dump());
      return SchemaViolation{path, "one of: " + options + " (got " + v.dump() + ")"};
    }
  }
  if (auto c = schema.find("const"); c != schema.end() && *c != v)
    return SchemaViolation{path, "exactly " + c->dump()};
  for (const char* key : {"anyOf", "oneOf"}) {
    if (auto alts = schema.find(key); alts != schema.end()) {
      std::optional<SchemaViolation> first;
      bool any = false;
      for (const auto& alt : *alts) {
        auto bad = check(alt, v, path, ctx);
        if (!bad) {
          any = true;
          break;
        }
        if (!first) first = bad;
      }
      if (!any) return first;
    }
  }
  if (v.is_object())
    if (auto bad = check_object(schema, v, path, ctx)) return bad;
  return check_bounds(schema, v, path, ctx);
}

}  // namespace

std::string SchemaViolation::message() const {
  if (path.empty()) return "arguments: expected " + expected;
  return "argument '" + path + "': expected " + expected;
}

std::optional<SchemaViolation> validate_schema(const json& schema, const json& value) {
  Ctx ctx{schema};
  return check(schema, value, "", ctx);
}

void apply_defaults(const json& schema, json& value) {
  if (!schema.is_object() || !value.is_object()) return;
  auto props = schema.find("properties");
  if (props == schema.end()) return;
  for (const auto& [key, sub] : props->items()) {
    if (!value.contains(key)) {
      if (auto d = sub.find("default"); d != sub.end()) value[key] = *d;
    } else if (value[key].is_object()) {
      apply_defaults(sub, value[key]);
    }
  }
}

}  // namespace sandcastle::mcp
