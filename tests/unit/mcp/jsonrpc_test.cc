#include "mcp/jsonrpc.h"

#include <gtest/gtest.h>

#include "mcp/protocol.h"

namespace sandcastle::mcp {
namespace {

TEST(JsonRpcTest, ClassifiesRequestsNotificationsResponses) {
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1,"method":"ping"})")).kind,
            MessageKind::kRequest);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":"a","method":"ping"})")).kind,
            MessageKind::kRequest);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","method":"notifications/initialized"})")).kind,
            MessageKind::kNotification);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1,"result":{}})")).kind,
            MessageKind::kResponse);
}

TEST(JsonRpcTest, RejectsMalformedMessagesAndRecoversId) {
  auto c = classify(json::parse(R"({"jsonrpc":"1.0","id":7,"method":"ping"})"));
  EXPECT_EQ(c.kind, MessageKind::kInvalid);
  EXPECT_EQ(c.id, 7);
  EXPECT_NE(c.why.find("jsonrpc"), std::string::npos);

  EXPECT_EQ(classify(json::parse("42")).kind, MessageKind::kInvalid);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":null,"method":"ping"})")).kind,
            MessageKind::kInvalid);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1.5,"method":"ping"})")).kind,
            MessageKind::kInvalid);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1,"method":3})")).kind,
            MessageKind::kInvalid);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1,"method":"x","params":5})")).kind,
            MessageKind::kInvalid);
  EXPECT_EQ(classify(json::parse(R"({"jsonrpc":"2.0","id":1})")).kind, MessageKind::kInvalid);
}

TEST(JsonRpcTest, ErrorShape) {
  json e = make_error("abc", rpc_error::kInvalidParams, "bad", json{{"x", 1}});
  EXPECT_EQ(e["id"], "abc");
  EXPECT_EQ(e["error"]["code"], -32602);
  EXPECT_EQ(e["error"]["data"]["x"], 1);
  EXPECT_FALSE(make_error(1, -32601, "m").at("error").contains("data"));
}

TEST(JsonRpcTest, DumpReplacesInvalidUtf8) {
  json msg = make_notification("n", json{{"text", std::string("ok\xff\xfe")}});
  std::string out = dump_message(msg);
  EXPECT_NE(out.find("ok\xEF\xBF\xBD"), std::string::npos);  // U+FFFD
  EXPECT_TRUE(json::accept(out));
}

TEST(JsonRpcTest, PreserializedResultIsSplicedAsIs) {
  const std::string text = R"({"tools":[{"name":"a"}],"nextCursor":"x"})";
  json reply = make_result(7, preserialized(text));
  std::string out = dump_message(reply);
  EXPECT_EQ(json::parse(out), json::parse(R"({"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a"}],"nextCursor":"x"}})"));
  EXPECT_NE(out.find(text), std::string::npos);
  // In a batch reply too, beside ordinary replies.
  json batch = json::array({reply, make_result("b", json{{"ok", true}})});
  json parsed = json::parse(dump_message(batch));
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0]["result"]["nextCursor"], "x");
  EXPECT_EQ(parsed[1]["result"]["ok"], true);
  // A result that merely has other keys is serialized normally.
  json normal = make_result(1, json{{kPreserializedKey, "{}"}, {"other", 1}});
  EXPECT_EQ(json::parse(dump_message(normal))["result"]["other"], 1);
}

TEST(ProtocolTest, NegotiatesLegacyVersions) {
  for (auto v : kLegacyVersions) EXPECT_EQ(negotiate_legacy_version(v), v);
  EXPECT_EQ(negotiate_legacy_version("2023-01-01"), "2025-11-25");
  EXPECT_EQ(negotiate_legacy_version("2026-07-28"), "2025-11-25");
  EXPECT_TRUE(is_supported_modern_version("2026-07-28"));
  EXPECT_FALSE(is_supported_modern_version("2025-11-25"));
}

TEST(ProtocolTest, LogLevelsAreOrdered) {
  EXPECT_LT(log_level_rank("debug"), log_level_rank("info"));
  EXPECT_LT(log_level_rank("warning"), log_level_rank("emergency"));
  EXPECT_EQ(log_level_rank("verbose"), -1);
}

}  // namespace
}  // namespace sandcastle::mcp
