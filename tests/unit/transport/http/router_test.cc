#include "transport/http/router.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "transport/http/problem.h"

namespace sandcastle::transport::http {
namespace {

RouteHandler named(std::string* hit, std::string name) {
  return [hit, name](Call&) { *hit = name; };
}

TEST(RouterTemplate, SegmentsRestAndLiterals) {
  PathParams p;
  EXPECT_TRUE(match_template("/api/v1/sandboxes/{id}", "/api/v1/sandboxes/sb-1", &p));
  EXPECT_EQ(p["id"], "sb-1");
  // A segment parameter is one non-empty segment, never a slash.
  EXPECT_FALSE(match_template("/api/v1/sandboxes/{id}", "/api/v1/sandboxes/", &p));
  EXPECT_FALSE(match_template("/api/v1/sandboxes/{id}", "/api/v1/sandboxes/a/b", &p));
  EXPECT_FALSE(match_template("/api/v1/sandboxes/{id}", "/api/v1/sandboxes", &p));
  EXPECT_TRUE(match_template("/api/v1/sandboxes/{id}/files", "/api/v1/sandboxes/x/files", &p));
  EXPECT_EQ(p["id"], "x");
  // A catch-all takes the rest, slashes and all, or nothing.
  EXPECT_TRUE(match_template("/files/{token*}", "/files/a/b/../c", &p));
  EXPECT_EQ(p["token"], "a/b/../c");
  EXPECT_TRUE(match_template("/.well-known/openid-configuration{rest*}",
                             "/.well-known/openid-configuration", &p));
  EXPECT_EQ(p["rest"], "");
  EXPECT_FALSE(match_template("/files/{token*}", "/filesx", &p));
  EXPECT_FALSE(match_template("/mcp", "/mcp/", &p));
  EXPECT_FALSE(match_template("/mcp", "/mc", &p));
}

TEST(RouterTemplate, MalformedTemplatesAreRefused) {
  EXPECT_TRUE(valid_template("/a/{b}/c/{d*}"));
  EXPECT_FALSE(valid_template("a"));
  EXPECT_FALSE(valid_template("/a/{b"));
  EXPECT_FALSE(valid_template("/a/b}"));
  EXPECT_FALSE(valid_template("/a/{}"));
  EXPECT_FALSE(valid_template("/a/{b*}/c"));  // a catch-all only last
  EXPECT_FALSE(valid_template("/a/{b}{c}"));  // ambiguous split
  EXPECT_EQ(template_params("/s/{id}/f/{rest*}"), (std::vector<std::string>{"id", "rest"}));
  Router r;
  EXPECT_FALSE(r.add("GET", "/x/{", {}, [](Call&) {}).ok());
  EXPECT_TRUE(r.add("GET", "/x", {}, [](Call&) {}).ok());
  auto dup = r.add("GET", "/x", {}, [](Call&) {});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ErrorCode::kInvalidArgument);
}

TEST(Router, MethodsAllowAndLiteralsBeforeParams) {
  Router r;
  std::string hit;
  ASSERT_TRUE(r.add("GET", "/api/v1/sandboxes", {}, named(&hit, "list")).ok());
  ASSERT_TRUE(r.add("POST", "/api/v1/sandboxes", {}, named(&hit, "create")).ok());
  ASSERT_TRUE(r.add("GET", "/api/v1/sandboxes/{id}", {}, named(&hit, "get")).ok());
  ASSERT_TRUE(r.add("DELETE", "/api/v1/sandboxes/{id}", {}, named(&hit, "delete")).ok());
  ASSERT_TRUE(r.add("GET", "/api/v1/sandboxes/events", {}, named(&hit, "literal")).ok());
  ASSERT_TRUE(r.add("*", "/mcp", {}, named(&hit, "mcp")).ok());

  auto m = r.match("POST", "/api/v1/sandboxes");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->path, "/api/v1/sandboxes");
  EXPECT_EQ(m.route->method, "POST");

  m = r.match("DELETE", "/api/v1/sandboxes/abc");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.params["id"], "abc");

  // The literal route wins, and owns its path: DELETE there is a 405, not {id}.
  m = r.match("GET", "/api/v1/sandboxes/events");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(m.route->path, "/api/v1/sandboxes/events");
  m = r.match("DELETE", "/api/v1/sandboxes/events");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(allow_header(m.allowed), "GET");

  m = r.match("PUT", "/api/v1/sandboxes");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(allow_header(m.allowed), "GET, POST");

  m = r.match("GET", "/api/v1/nothing");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_TRUE(m.allowed.empty());

  for (const char* method : {"GET", "POST", "DELETE", "PATCH"}) {
    m = r.match(method, "/mcp");
    ASSERT_NE(m.route, nullptr) << method;
  }
  // A route's undescribed path parameters are documented anyway.
  auto get = r.match("GET", "/api/v1/sandboxes/x").route;
  ASSERT_EQ(get->meta.params.size(), 1u);
  EXPECT_EQ(get->meta.params[0].name, "id");
  EXPECT_EQ(get->meta.params[0].in, "path");
  EXPECT_TRUE(get->meta.params[0].required);
}

TEST(Problem, ShapeAndStatusOfErrorCodes) {
  Response r = problem(Error::make(ErrorCode::kNotFound, "sandbox x not found"));
  EXPECT_EQ(r.status, 404);
  ASSERT_FALSE(r.headers.empty());
  EXPECT_EQ(r.headers[0].first, "Content-Type");
  EXPECT_EQ(r.headers[0].second, "application/problem+json");
  auto body = nlohmann::json::parse(r.body);
  EXPECT_EQ(body["type"], "https://sandcastle.dev/problems/not_found");
  EXPECT_EQ(body["title"], "Not Found");
  EXPECT_EQ(body["status"], 404);
  EXPECT_EQ(body["detail"], "sandbox x not found");
  EXPECT_EQ(body["code"], "not_found");

  EXPECT_EQ(status_for(Error::make(ErrorCode::kInvalidArgument, "")), 400);
  EXPECT_EQ(status_for(Error::make(ErrorCode::kResourceExhausted, "")), 429);
  EXPECT_EQ(status_for(Error::make(ErrorCode::kAlreadyExists, "")), 409);
  EXPECT_EQ(status_for(Error::make(ErrorCode::kPermissionDenied, "")), 403);
  // A system error speaks for its errno.
  EXPECT_EQ(problem_code(Error::from_errno("open", ENOENT)), "not_found");
  EXPECT_EQ(status_for(Error::from_errno("open", EACCES)), 403);
  EXPECT_EQ(problem_code(Error::from_errno("read", EIO)), "system");
  EXPECT_EQ(status_for(Error::from_errno("read", EIO)), 500);

  auto csrf = nlohmann::json::parse(problem(403, "csrf", "missing X-CSRF-Token").body);
  EXPECT_EQ(csrf["code"], "csrf");
  EXPECT_EQ(csrf["status"], 403);
  // Hostile text in a detail stays valid JSON.
  auto bad = problem(400, "invalid_argument", std::string("bad \xff byte"));
  EXPECT_TRUE(nlohmann::json::accept(bad.body));
}

}  // namespace
}  // namespace sandcastle::transport::http
