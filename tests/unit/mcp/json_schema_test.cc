#include "mcp/json_schema.h"

#include <gtest/gtest.h>

#include "mcp/jsonrpc.h"  // mcp::json

namespace sandcastle::mcp {
namespace {

const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "code": {"type": "string", "minLength": 1},
    "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 30},
    "language": {"type": "string", "enum": ["python", "javascript"]},
    "packages": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
    "limits": {"type": "object", "properties": {"memory_mb": {"type": "integer", "minimum": 16}},
               "additionalProperties": false},
    "stdin": {"type": ["string", "null"]}
  },
  "required": ["code"],
  "additionalProperties": false
})");

std::string violation(const json& v) {
  auto bad = validate_schema(kSchema, v);
  return bad ? bad->message() : "";
}

TEST(JsonSchemaTest, AcceptsConformingValues) {
  EXPECT_EQ(violation(json{{"code", "print(1)"}}), "");
  EXPECT_EQ(violation(json{{"code", "x"}, {"timeout_s", 10}, {"language", "python"},
                           {"packages", {"a", "b"}}, {"limits", {{"memory_mb", 64}}},
                           {"stdin", nullptr}}),
            "");
  // 5.0 is an integer in JSON Schema.
  EXPECT_EQ(violation(json{{"code", "x"}, {"timeout_s", 5.0}}), "");
}

TEST(JsonSchemaTest, NamesTheFieldAndWhatWasExpected) {
  EXPECT_EQ(violation(json::object()), "argument 'code': expected present (required)");
  EXPECT_EQ(violation(json{{"code", 5}}), "argument 'code': expected a string, got an integer");
  EXPECT_EQ(violation(json{{"code", ""}}), "argument 'code': expected a string of at least 1 characters");
  EXPECT_EQ(violation(json{{"code", "x"}, {"timeout_s", 0}}),
            "argument 'timeout_s': expected >= 1, got 0");
  EXPECT_EQ(violation(json{{"code", "x"}, {"timeout_s", 2.5}}),
            "argument 'timeout_s': expected an integer, got a number");
  EXPECT_EQ(violation(json{{"code", "x"}, {"language", "cobol"}}),
            "argument 'language': expected one of: python, javascript (got \"cobol\")");
  EXPECT_EQ(violation(json{{"code", "x"}, {"packages", {"a", 1}}}),
            "argument 'packages[1]': expected a string, got an integer");
  EXPECT_EQ(violation(json{{"code", "x"}, {"packages", {"a", "b", "c", "d"}}}),
            "argument 'packages': expected an array of at most 3 items");
  EXPECT_EQ(violation(json{{"code", "x"}, {"limits", {{"memory_mb", 1}}}}),
            "argument 'limits.memory_mb': expected >= 16, got 1");
  EXPECT_EQ(violation(json{{"code", "x"}, {"stdin", 3}}),
            "argument 'stdin': expected a string or a null, got an integer");
  auto unknown = violation(json{{"code", "x"}, {"cod", "y"}});
  EXPECT_NE(unknown.find("argument 'cod': expected absent: unknown property"), std::string::npos);
  EXPECT_EQ(violation(json::array()), "arguments: expected an object, got an array");
}

TEST(JsonSchemaTest, AppliesDefaults) {
  json v{{"code", "x"}};
  apply_defaults(kSchema, v);
  EXPECT_EQ(v["timeout_s"], 30);
  EXPECT_FALSE(v.contains("language"));
}

TEST(JsonSchemaTest, AnyOfReportsFirstAlternative) {
  json schema = json::parse(R"({"anyOf":[{"type":"string"},{"type":"integer","minimum":0}]})");
  EXPECT_FALSE(validate_schema(schema, "s"));
  EXPECT_FALSE(validate_schema(schema, 3));
  EXPECT_TRUE(validate_schema(schema, -1));
}

TEST(JsonSchemaTest, FollowsLocalRefs) {
  json schema = json::parse(R"({
    "type": "object",
    "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}}},
              "node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"},
                                                        "v": {"type": "integer"}}}},
    "properties": {"address": {"$ref": "#/$defs/address"}, "list": {"$ref": "#/$defs/node"}}
  })");
  EXPECT_FALSE(validate_schema(schema, json::parse(R"({"address":{"street":"Main"}})")));
  auto bad = validate_schema(schema, json::parse(R"({"address":{"street":5}})"));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->message(), "argument 'address.street': expected a string, got an integer");
  auto deep = validate_schema(schema, json::parse(R"({"list":{"v":1,"next":{"v":2,"next":{"v":"x"}}}})"));
  ASSERT_TRUE(deep);
  EXPECT_EQ(deep->path, "list.next.next.v");
}

}  // namespace
}  // namespace sandcastle::mcp
