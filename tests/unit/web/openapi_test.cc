// The OpenAPI document against the route table the server really builds (the
// MCP face's routes and the REST API's): every documented route is in it
// with its methods and parameters, every path in it is routed, and it has
// OpenAPI 3.1's required shape; and against the contract, docs/rest-api.md:
// the /api/v1 operations of its route table are exactly the document's and
// the router's. (tests/e2e/rest_api.test.mjs validates the served document
// against the OpenAPI 3.1 schema.)
#include "web/openapi.h"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "mcp/server.h"
#include "route_paths.h"
#include "transport/http/mcp_http.h"
#include "web/rest_api.h"

namespace sandcastle::web {
namespace {

using nlohmann::json;

using testing::concrete;

// "GET /api/v1/x" for every operation of docs/rest-api.md's route table.
// A row names one method and one or more paths: `/api/v1/a/{id}/pause`
// `/resume` (a short one replaces the last segment of the first).
std::set<std::string> doc_operations() {
  std::ifstream in(std::string(SANDCASTLE_SOURCE_DIR) + "/docs/rest-api.md");
  EXPECT_TRUE(in.good()) << "docs/rest-api.md";
  std::set<std::string> ops;
  std::string line;
  const std::regex row(R"(^\| (GET|POST|PUT|PATCH|DELETE) (`[^|]*)\|)");
  const std::regex code("`([^`]*)`");
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string method = m[1];
    const std::string cell = m[2];
    std::string first;
    for (std::sregex_iterator it(cell.begin(), cell.end(), code), end; it != end; ++it) {
      std::string p = (*it)[1];
      if (first.empty()) {
        first = p;
      } else {
        p = first.substr(0, first.rfind('/')) + p;
      }
      ops.insert(method + " " + p);
    }
  }
  return ops;
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

TEST_F(OpenApiTest, TheContractTheDocumentAndTheRouterAgree) {
  const auto doc = doc_operations();
  ASSERT_GT(doc.size(), 20u) << "the route table of docs/rest-api.md did not parse";
  std::set<std::string> openapi, routed;
  for (const auto& [path, item] : doc_["paths"].items()) {
    if (path.rfind("/api/", 0) != 0) continue;
    for (const auto& [method, op] : item.items()) {
      std::string upper = method;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      openapi.insert(upper + " " + path);
    }
  }
  for (const auto& r : mcp_->router().routes())
    if (r->path.rfind("/api/", 0) == 0) routed.insert(r->method + " " + r->path);
  for (const auto& op : doc) {
    EXPECT_TRUE(openapi.count(op)) << op << " is in docs/rest-api.md, not in openapi.json";
    EXPECT_TRUE(routed.count(op)) << op << " is in docs/rest-api.md, not routed";
  }
  for (const auto& op : openapi)
    EXPECT_TRUE(doc.count(op)) << op << " is in openapi.json, not in docs/rest-api.md";
  for (const auto& op : routed)
    EXPECT_TRUE(doc.count(op)) << op << " is routed, not in docs/rest-api.md";
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
