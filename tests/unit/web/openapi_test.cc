// The OpenAPI document against the route table the server really builds (the
// MCP face's routes and the REST API's): every documented route is in it
// with its methods and parameters, every path in it is routed, and it has
// OpenAPI 3.1's required shape. (tests/e2e/rest_api.test.mjs validates the
// served document against the OpenAPI 3.1 schema.)
#include "web/openapi.h"

#include <gtest/gtest.h>

#include <set>

#include "mcp/server.h"
#include "transport/http/mcp_http.h"
#include "web/rest_api.h"

namespace sandcastle::web {
namespace {

using nlohmann::json;

// A concrete path for a template: every {param} filled in.
std::string concrete(const std::string& tmpl) {
  std::string out;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    if (tmpl[i] == '{') {
      i = tmpl.find('}', i);
      out += "p1";
    } else {
      out.push_back(tmpl[i]);
    }
  }
  return out;
}

class OpenApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mcp_ = std::make_unique<transport::http::McpHttp>(server_, transport::http::McpHttpOptions{});
    rest_ = std::make_unique<RestApi>(RestOptions{});
    rest_->add_routes(mcp_->router());
    doc_ = openapi_document(mcp_->router(), {"sandcastle", "1.2.3", ""});
  }
  mcp::Server server_;
  std::unique_ptr<transport::http::McpHttp> mcp_;
  std::unique_ptr<RestApi> rest_;
  json doc_;
};

TEST_F(OpenApiTest, EveryRouteIsDocumentedAndEveryDocumentedPathIsRouted) {
  const auto& router = mcp_->router();
  size_t documented = 0;
  for (const auto& r : router.routes()) {
    if (!r->meta.documented) {
      // Only catch-all templates (not expressible in OpenAPI) are left out.
      EXPECT_NE(r->path.find('*'), std::string::npos) << r->path << " is not documented";
      continue;
    }
    ++documented;
    ASSERT_TRUE(doc_["paths"].contains(r->path)) << r->path;
    const json& item = doc_["paths"][r->path];
    if (r->method == "*") {
      EXPECT_TRUE(item.contains("post")) << r->path;
      continue;
    }
    std::string m = r->method;
    for (auto& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ASSERT_TRUE(item.contains(m)) << r->method << " " << r->path;
    const json& op = item[m];
    EXPECT_FALSE(op.value("summary", "").empty()) << r->path;
    EXPECT_TRUE(op["responses"].contains(std::to_string(r->meta.success_status))) << r->path;
    // Every path parameter of the template is declared, required, in: path.
    for (const auto& name : transport::http::template_params(r->path)) {
      bool found = false;
      for (const auto& p : op.value("parameters", json::array()))
        if (p["name"] == name && p["in"] == "path" && p["required"] == true) found = true;
      EXPECT_TRUE(found) << r->path << " {" << name << "}";
    }
  }
  EXPECT_GT(documented, 10u);
  std::set<std::string> operations;
  for (const auto& [path, item] : doc_["paths"].items()) {
    for (const auto& [method, op] : item.items()) {
      std::string upper = method;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      auto m = router.match(upper, concrete(path));
      ASSERT_NE(m.route, nullptr) << method << " " << path << " is documented but not routed";
      EXPECT_EQ(m.route->path, path);
      EXPECT_TRUE(operations.insert(op["operationId"].get<std::string>()).second)
          << "duplicate operationId";
    }
  }
}

TEST_F(OpenApiTest, HasTheOpenApi31Shape) {
  EXPECT_EQ(doc_["openapi"], "3.1.0");
  EXPECT_EQ(doc_["info"]["title"], "sandcastle");
  EXPECT_EQ(doc_["info"]["version"], "1.2.3");
  ASSERT_TRUE(doc_["paths"].is_object());
  for (const auto& [path, item] : doc_["paths"].items()) {
    EXPECT_EQ(path[0], '/');
    for (const auto& [method, op] : item.items()) {
      EXPECT_TRUE(method == "get" || method == "post" || method == "put" || method == "delete")
          << method;
      EXPECT_TRUE(op["responses"].is_object());
      EXPECT_TRUE(op["security"].is_array());
      for (const auto& s : op["security"])
        for (const auto& [scheme, _] : s.items())
          EXPECT_TRUE(doc_["components"]["securitySchemes"].contains(scheme)) << scheme;
    }
  }
  // Public routes say so; admin routes are marked.
  EXPECT_TRUE(doc_["paths"]["/api/v1/openapi.json"]["get"]["security"].empty());
  EXPECT_TRUE(doc_["paths"]["/api/v1/keys"]["post"].value("x-admin-only", false));
}

}  // namespace
}  // namespace sandcastle::web
