#include "web/openapi.h"

#include <cctype>

#include "common/text.h"

namespace sandcastle::web {

using nlohmann::json;
using transport::http::Route;
using transport::http::RouteAuth;

namespace {

std::string operation_id(const std::string& method, const std::string& path) {
  std::string id = ascii_lower(method);
  bool up = true;
  for (char c : path) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      id.push_back(up ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c);
      up = false;
    } else {
      up = true;
    }
  }
  return id;
}

json media(const std::string& type, const json& schema) {
  json m = json::object();
  if (!schema.is_null()) m["schema"] = schema;
  return json{{type, m}};
}

json operation(const std::string& method, const Route& r) {
  const auto& meta = r.meta;
  json op{{"operationId", operation_id(method, r.path)},
          {"summary", meta.summary.empty() ? r.path : meta.summary}};
  if (!meta.tags.empty()) op["tags"] = meta.tags;
  json params = json::array();
  for (const auto& p : meta.params) {
    json param{{"name", p.name},
               {"in", p.in},
               {"required", p.in == "path" ? true : p.required},
               {"schema", {{"type", p.type}}}};
    if (!p.description.empty()) param["description"] = p.description;
    params.push_back(std::move(param));
  }
  if (!params.empty()) op["parameters"] = std::move(params);
  if (!meta.request_schema.is_null())
    op["requestBody"] = {{"required", true},
                         {"content", media(meta.request_type, meta.request_schema)}};
  json ok{{"description", "Success"}};
  if (meta.success_status != 204 && !meta.response_type.empty())
    ok["content"] = media(meta.response_type, meta.response_schema);
  json responses{{std::to_string(meta.success_status), ok}};
  responses["default"] = {
      {"description", "An error (RFC 9457 problem details)"},
      {"content", media("application/problem+json", {{"$ref", "#/components/schemas/Problem"}})}};
  op["responses"] = std::move(responses);
  switch (meta.auth) {
    case RouteAuth::kNone: op["security"] = json::array(); break;
    case RouteAuth::kKey:
      op["security"] = json::array({{{"bearer", json::array()}}, {{"apiKey", json::array()}}});
      break;
    case RouteAuth::kApi:
    case RouteAuth::kAdmin:
      op["security"] = json::array(
          {{{"bearer", json::array()}}, {{"apiKey", json::array()}}, {{"session", json::array()}}});
      if (meta.auth == RouteAuth::kAdmin) op["x-admin-only"] = true;
      break;
  }
  return op;
}

}  // namespace

json openapi_document(const transport::http::Router& router, const OpenApiInfo& info) {
  json paths = json::object();
  for (const auto& r : router.routes()) {
    if (!r->meta.documented || r->path.find('*') != std::string::npos) continue;
    json& item = paths[r->path];
    if (item.is_null()) item = json::object();
    if (r->method == "*") {
      // Every method reaches the handler; document the ones a client uses.
      for (const char* m : {"GET", "POST", "DELETE"}) item[ascii_lower(m)] = operation(m, *r);
    } else {
      item[ascii_lower(r->method)] = operation(r->method, *r);
    }
  }
  json problem_schema{{"type", "object"},
                      {"required", json::array({"type", "title", "status", "code"})},
                      {"properties",
                       {{"type", {{"type", "string"}}},
                        {"title", {{"type", "string"}}},
                        {"status", {{"type", "integer"}}},
                        {"detail", {{"type", "string"}}},
                        {"code", {{"type", "string"}}}}}};
  json doc{
      {"openapi", "3.1.0"},
      {"info", {{"title", info.title}, {"version", info.version.empty() ? "0" : info.version}}},
      {"paths", std::move(paths)},
      {"components",
       {{"schemas", {{"Problem", problem_schema}}},
        {"securitySchemes",
         {{"bearer",
           {{"type", "http"},
            {"scheme", "bearer"},
            {"description", "an API key: sc_<id>_<secret>"}}},
          {"apiKey", {{"type", "apiKey"}, {"in", "header"}, {"name", "X-API-Key"}}},
          {"session",
           {{"type", "apiKey"},
            {"in", "cookie"},
            {"name", "sc_session"},
            {"description", "POST /api/v1/session; unsafe methods also need X-CSRF-Token"}}}}}}}};
  if (!info.description.empty()) doc["info"]["description"] = info.description;
  return doc;
}

}  // namespace sandcastle::web
