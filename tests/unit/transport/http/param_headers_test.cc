#include "transport/http/param_headers.h"

#include <gtest/gtest.h>

#include "mcp/param_headers.h"

namespace sandcastle::transport::http {
namespace {

using mcp::json;
using Headers = std::map<std::string, std::string>;

TEST(ParamHeaderValue, DecodesTheBase64FormAndTakesTheRestLiterally) {
  EXPECT_EQ(*decode_param_value("=?base64?SGVsbG8=?="), "Hello");
  EXPECT_EQ(*decode_param_value("=?base64?w6ljaG8=?="),
            "\xc3\xa9"
            "cho");
  EXPECT_EQ(*decode_param_value("=?base64?\?="), "");
  EXPECT_EQ(*decode_param_value("us-west1"), "us-west1");
  EXPECT_EQ(*decode_param_value("SGVsbG8="), "SGVsbG8=");                    // no prefix: literal
  EXPECT_EQ(*decode_param_value("=?base64?SGVsbG8="), "=?base64?SGVsbG8=");  // no suffix: literal
  EXPECT_EQ(*decode_param_value("a b"), "a b");
}

TEST(ParamHeaderValue, RefusesBadBase64AndNonAscii) {
  for (const char* bad : {"=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?SGVsbG8===?=",
                          "=?base64?SG=sbG8=?=", "=?base64?SGVsbG8=\n?=", "=?base64?/w==?="}) {
    auto r = decode_param_value(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_FALSE(decode_param_value("caf\xc3\xa9").ok());
  EXPECT_FALSE(decode_param_value("a\tb").ok());
  EXPECT_FALSE(decode_param_value("a\x7f").ok());
}

class ParamHeaderCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    json schema{{"type", "object"},
                {"properties",
                 {{"sandbox_id", {{"type", "string"}}},
                  {"count", {{"type", "integer"}, {mcp::kHeaderMark, "Count"}}},
                  {"flag", {{"type", "boolean"}, {mcp::kHeaderMark, "Flag"}}},
                  {"code", {{"type", "string"}}}}}};
    tools_.add({"run", "", "d", schema, nullptr, nullptr, nullptr},
               [](const json&, mcp::RequestContext&) { return mcp::ToolResult::text("ok"); });
  }
  static json call(json args) {
    return json{{"jsonrpc", "2.0"},
                {"id", 1},
                {"method", "tools/call"},
                {"params", {{"name", "run"}, {"arguments", std::move(args)}}}};
  }
  std::optional<std::string> check(const Headers& h, const json& args, bool required) {
    return check_param_headers(h, tools_, call(args), required);
  }
  mcp::ToolRegistry tools_;
};

TEST_F(ParamHeaderCheck, MatchingHeadersPass) {
  json args{{"sandbox_id", "sb-1"}, {"count", 42}, {"flag", true}, {"code", "x"}};
  Headers h{
      {"mcp-param-sandbox-id", "sb-1"}, {"mcp-param-count", "42"}, {"mcp-param-flag", "true"}};
  EXPECT_EQ(check(h, args, true), std::nullopt);
  h["mcp-param-count"] = "42.0";  // numbers compare by value
  EXPECT_EQ(check(h, args, true), std::nullopt);
  h["mcp-param-sandbox-id"] = "=?base64?c2ItMQ==?=";
  EXPECT_EQ(check(h, args, true), std::nullopt);
}

TEST_F(ParamHeaderCheck, MismatchNamesTheHeaderAndTheParameter) {
  auto bad = check({{"mcp-param-sandbox-id", "sb-2"}}, {{"sandbox_id", "sb-1"}}, false);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("Mcp-Param-Sandbox-Id"), std::string::npos);
  EXPECT_NE(bad->find("params.arguments.sandbox_id"), std::string::npos);
  EXPECT_TRUE(check({{"mcp-param-count", "042x"}}, {{"count", 42}}, false));
  EXPECT_TRUE(check({{"mcp-param-count", "43"}}, {{"count", 42}}, false));
  EXPECT_TRUE(check({{"mcp-param-flag", "TRUE"}}, {{"flag", true}}, false));
  EXPECT_TRUE(check({{"mcp-param-sandbox-id", "SB-1"}}, {{"sandbox_id", "sb-1"}}, false));
  // A header for an argument the body does not carry disagrees with it.
  bad = check({{"mcp-param-sandbox-id", "sb-1"}}, json::object(), false);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("absent"), std::string::npos);
  // Two headers of one name arrive joined: never a match.
  EXPECT_TRUE(check({{"mcp-param-sandbox-id", "sb-1, sb-2"}}, {{"sandbox_id", "sb-1"}}, false));
}

TEST_F(ParamHeaderCheck, MalformedValuesAreRefused) {
  auto bad =
      check({{"mcp-param-sandbox-id", "=?base64?c2ItMQ?="}}, {{"sandbox_id", "sb-1"}}, false);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("malformed"), std::string::npos);
  EXPECT_TRUE(
      check({{"mcp-param-sandbox-id", "sb-\xc3\xa9"}}, {{"sandbox_id", "sb-\xc3\xa9"}}, false));
}

TEST_F(ParamHeaderCheck, AbsentHeaderIsRequiredOnlyWhenAsked) {
  json args{{"sandbox_id", "sb-1"}};
  EXPECT_EQ(check({}, args, false), std::nullopt);
  auto bad = check({}, args, true);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("required"), std::string::npos);
  // Null and absent arguments need no header.
  EXPECT_EQ(check({}, {{"sandbox_id", nullptr}, {"code", "x"}}, true), std::nullopt);
}

TEST_F(ParamHeaderCheck, OtherMessagesAndUnknownHeadersPass) {
  Headers h{{"mcp-param-sandbox-id", "sb-1"}, {"mcp-param-other", "x"}};
  EXPECT_EQ(check_param_headers(h, tools_, json{{"method", "tools/list"}, {"id", 1}}, true),
            std::nullopt);
  EXPECT_EQ(check_param_headers(h, tools_, call({{"sandbox_id", "sb-1"}}), true), std::nullopt);
  json unknown{{"method", "tools/call"}, {"id", 1}, {"params", {{"name", "nope"}}}};
  EXPECT_EQ(check_param_headers(h, tools_, unknown, true), std::nullopt);
}

TEST_F(ParamHeaderCheck, CountAndSizeAreBounded) {
  Headers many;
  for (size_t i = 0; i <= kMaxParamHeaders; ++i) many["mcp-param-x" + std::to_string(i)] = "v";
  auto bad = check_param_headers(many, tools_, json{{"method", "tools/list"}, {"id", 1}}, false);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("more than 16"), std::string::npos);
  many.erase(many.begin());
  EXPECT_EQ(check_param_headers(many, tools_, json{{"method", "tools/list"}, {"id", 1}}, false),
            std::nullopt);
  std::string big(kMaxParamHeaderBytes + 1, 'a');
  bad = check({{"mcp-param-sandbox-id", big}}, {{"sandbox_id", big}}, false);
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("over 1024 bytes"), std::string::npos);
}

}  // namespace
}  // namespace sandcastle::transport::http
