// parse_json (common/json_parse.h): every limit refuses with its own error,
// before anything deep or large is built, and never throws.
#include "common/json_parse.h"

#include <gtest/gtest.h>

#include <string>

namespace sandcastle {
namespace {

constexpr JsonLimits kLimits{1 << 20};

std::string nested(const std::string& open, const std::string& close, std::size_t n,
                   const std::string& inner = "1") {
  std::string s;
  s.reserve(n * (open.size() + close.size()) + inner.size());
  for (std::size_t i = 0; i < n; ++i) s += open;
  s += inner;
  for (std::size_t i = 0; i < n; ++i) s += close;
  return s;
}

TEST(JsonParseTest, ParsesOrdinaryJson) {
  auto j = parse_json(R"({"a":[1,2,{"b":"x"}],"c":null})", kLimits);
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ((*j)["a"][2]["b"], "x");
  EXPECT_TRUE(parse_json("42", kLimits).ok());
  EXPECT_TRUE(parse_json("\"[[[\"", kLimits).ok());
}

TEST(JsonParseTest, DepthAtTheLimitIsAcceptedOneMoreIsRefused) {
  EXPECT_TRUE(parse_json(nested("[", "]", kJsonMaxDepth), kLimits).ok());
  EXPECT_TRUE(parse_json(nested("{\"a\":", "}", kJsonMaxDepth), kLimits).ok());
  for (const auto& text :
       {nested("[", "]", kJsonMaxDepth + 1), nested("{\"a\":", "}", kJsonMaxDepth + 1),
        nested("[{\"k\":", "}]", kJsonMaxDepth / 2 + 1)}) {
    auto j = parse_json(text, kLimits);
    ASSERT_FALSE(j.ok());
    EXPECT_TRUE(is_json_limit_error(j.error()));
    EXPECT_NE(j.error().message().find("deeper than the limit of 128 levels"), std::string::npos)
        << j.error().message();
  }
}

// What crashed the server: 100k levels, closed or not, arrays or objects.
TEST(JsonParseTest, HundredThousandLevelsAreRefusedWithoutRecursion) {
  const std::size_t n = 100'000;
  for (const auto& text : {nested("[", "]", n), nested("{\"a\":", "}", n), std::string(n, '['),
                           nested("{\"a\":", "", n)}) {
    auto j = parse_json(text, JsonLimits{16 << 20});
    ASSERT_FALSE(j.ok());
    EXPECT_TRUE(is_json_limit_error(j.error())) << j.error().message();
  }
}

// Brackets inside strings, escaped quotes and backslash runs do not count.
TEST(JsonParseTest, BracketsInsideStringsDoNotCount) {
  const std::string deep_text = "\"" + std::string(1000, '[') + "\"";
  EXPECT_TRUE(parse_json(deep_text, kLimits).ok());
  EXPECT_TRUE(parse_json(R"(["\"[[[[[[", "\\", "\\\"{{{{"])", JsonLimits{1 << 20, 2}).ok());
  // After an even backslash run the quote ends the string: what follows counts.
  auto j = parse_json(R"(["\\", [[1]]])", JsonLimits{1 << 20, 2});
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(is_json_limit_error(j.error()));
}

TEST(JsonParseTest, SizeLimitNamesTheSetting) {
  JsonLimits l{8};
  l.bytes_setting = "--max-body-bytes";
  auto j = parse_json(R"({"a":"123456"})", l);
  ASSERT_FALSE(j.ok());
  EXPECT_TRUE(is_json_limit_error(j.error()));
  EXPECT_EQ(j.error().message(),
            "the JSON text is 14 bytes, over the limit of 8 bytes (--max-body-bytes)");
  EXPECT_TRUE(parse_json("[1,2,3]", l).ok());
}

TEST(JsonParseTest, ValueCountLimit) {
  JsonLimits l{1 << 20};
  l.max_values = 4;
  EXPECT_TRUE(parse_json("[1,2,3,4]", l).ok());  // 1 array + 3 commas
  EXPECT_TRUE(parse_json("[1,2,3]", l).ok());
  EXPECT_TRUE(parse_json("[\"a,b,c,d,e,f\"]", l).ok());  // commas in strings do not count
  for (const char* text : {"[1,2,3,4,5]", R"({"a":1,"b":2,"c":3,"d":4,"e":5})", "[[],[],[],[]]"}) {
    auto j = parse_json(text, l);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_TRUE(is_json_limit_error(j.error()));
    EXPECT_NE(j.error().message().find("more than the limit of 4 values"), std::string::npos);
  }
}

TEST(JsonParseTest, SyntaxErrorsAreNotLimitErrors) {
  for (std::string text : {std::string("{bad"), std::string("[1,"), std::string("\"unterminated"),
                           std::string("1E1111"), std::string("\"\xff\""), std::string(""),
                           std::string("]]]]"), std::string("\"\\\"")}) {
    auto j = parse_json(text, kLimits);
    ASSERT_FALSE(j.ok()) << text;
    EXPECT_FALSE(is_json_limit_error(j.error())) << text;
    EXPECT_EQ(j.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(j.error().message().rfind("not valid JSON (UTF-8): ", 0), 0u) << j.error().message();
  }
}

}  // namespace
}  // namespace sandcastle
