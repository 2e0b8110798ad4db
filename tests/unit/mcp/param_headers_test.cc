#include "mcp/param_headers.h"

#include <gtest/gtest.h>

#include <stdexcept>

#include "mcp/tool_registry.h"

namespace sandcastle::mcp {
namespace {

json schema_with(json props) {
  return json{{"type", "object"}, {"properties", std::move(props)}};
}

TEST(ParamHeaders, MarksSandboxIdWhereItIsATopLevelString) {
  json s = schema_with({{"sandbox_id", {{"type", "string"}}}, {"code", {{"type", "string"}}}});
  mark_routing_params(s);
  EXPECT_EQ(s["properties"]["sandbox_id"][kHeaderMark], "Sandbox-Id");
  EXPECT_FALSE(s["properties"]["code"].contains(kHeaderMark));
  auto marks = param_headers_of(s);
  ASSERT_TRUE(marks.ok());
  ASSERT_EQ(marks->size(), 1U);
  EXPECT_EQ((*marks)[0].property, "sandbox_id");
  EXPECT_EQ((*marks)[0].name, "Sandbox-Id");
  EXPECT_EQ((*marks)[0].type, "string");
}

TEST(ParamHeaders, LeavesOtherShapesAndExistingMarksAlone) {
  json nested = schema_with({{"opts", schema_with({{"sandbox_id", {{"type", "string"}}}})}});
  json before = nested;
  mark_routing_params(nested);
  EXPECT_EQ(nested, before);  // only top-level properties are marked
  json typed = schema_with({{"sandbox_id", {{"type", "array"}}}});
  mark_routing_params(typed);
  EXPECT_FALSE(typed["properties"]["sandbox_id"].contains(kHeaderMark));
  json own = schema_with({{"sandbox_id", {{"type", "string"}, {kHeaderMark, "Box"}}}});
  mark_routing_params(own);
  EXPECT_EQ(own["properties"]["sandbox_id"][kHeaderMark], "Box");
}

TEST(ParamHeaders, RefusesMarksThatBreakTheRules) {
  auto refused = [](json props) {
    auto r = param_headers_of(schema_with(std::move(props)));
    return r.ok() ? std::string() : r.error().context;
  };
  EXPECT_NE(refused({{"a", {{"type", "string"}, {kHeaderMark, ""}}}}).find("non-empty"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "string"}, {kHeaderMark, "Has Space"}}}}).find("token"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "string"}, {kHeaderMark, "Colon:"}}}}).find("token"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "string"}, {kHeaderMark, "Caf\xc3\xa9"}}}}).find("token"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "number"}, {kHeaderMark, "A"}}}}).find("type"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "object"}, {kHeaderMark, "A"}}}}).find("type"),
            std::string::npos);
  EXPECT_NE(refused({{"a", {{"type", "string"}, {kHeaderMark, "Region"}}},
                     {"b", {{"type", "string"}, {kHeaderMark, "REGION"}}}})
                .find("repeats"),
            std::string::npos);
  EXPECT_NE(refused({{"o", schema_with({{"a", {{"type", "string"}, {kHeaderMark, "A"}}}})}})
                .find("top-level"),
            std::string::npos);
  EXPECT_EQ(refused({{"n", {{"type", "integer"}, {kHeaderMark, "N"}}},
                     {"b", {{"type", "boolean"}, {kHeaderMark, "B"}}}}),
            "");
}

TEST(ParamHeaders, RegistryMarksEveryToolAndRefusesABadMark) {
  ToolRegistry reg;
  reg.add({"t", "", "d", schema_with({{"sandbox_id", {{"type", "string"}}}}), nullptr, nullptr,
           nullptr},
          [](const json&, RequestContext&) { return ToolResult::text("ok"); });
  EXPECT_EQ(reg.find("t")->input_schema["properties"]["sandbox_id"][kHeaderMark], "Sandbox-Id");
  EXPECT_EQ(reg.list_page(
                std::nullopt)["tools"][0]["inputSchema"]["properties"]["sandbox_id"][kHeaderMark],
            "Sandbox-Id");
  EXPECT_THROW(
      reg.add({"u", "", "d", schema_with({{"a", {{"type", "number"}, {kHeaderMark, "A"}}}}),
               nullptr, nullptr, nullptr},
              [](const json&, RequestContext&) { return ToolResult::text("ok"); }),
      std::invalid_argument);
}

}  // namespace
}  // namespace sandcastle::mcp
