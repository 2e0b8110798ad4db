// The OpenAPI 3.1 document of the HTTP API, generated from the route table's
// metadata (router.h): what is served is what is documented.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "transport/http/router.h"

namespace sandcastle::web {

struct OpenApiInfo {
  std::string title = "sandcastle";
  std::string version;
  std::string description;
};

// Every documented route (catch-all templates cannot be expressed and are
// left out); a "*" route (its handler answers every method) as GET, POST and
// DELETE.
nlohmann::json openapi_document(const transport::http::Router& router, const OpenApiInfo& info);

}  // namespace sandcastle::web
