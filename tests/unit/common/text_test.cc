#include "common/text.h"

#include <gtest/gtest.h>

#include <string>

namespace sandcastle {
namespace {

TEST(TextTest, AsciiLowerLowersOnlyAToZ) {
  EXPECT_EQ(ascii_lower("Content-TYPE"), "content-type");
  // Bytes outside A-Z, UTF-8 included, are left as they are (no locale).
  EXPECT_EQ(ascii_lower("\xC3\x84-@[`{"), "\xC3\x84-@[`{");
  EXPECT_EQ(ascii_lower(""), "");
}

TEST(TextTest, TrimBlanksTakesSpacesAndTabsOnly) {
  EXPECT_EQ(trim_blanks(" \t gzip\t "), "gzip");
  EXPECT_EQ(trim_blanks("a b"), "a b");
  EXPECT_EQ(trim_blanks("\r\nx\n"), "\r\nx\n");  // CR and LF are not OWS
  EXPECT_EQ(trim_blanks(" \t "), "");
}

TEST(TextTest, AsciiIequalsFoldsOnlyAsciiLetters) {
  EXPECT_TRUE(ascii_iequals("Chunked", "chunked"));
  EXPECT_TRUE(ascii_iequals("X-GZIP", "x-gzip"));
  EXPECT_TRUE(ascii_iequals("", ""));
  EXPECT_FALSE(ascii_iequals("gzip", "gzip "));
  EXPECT_FALSE(ascii_iequals("gzip", "gzap"));
  // '@' and '`' sit next to 'A' and 'a' but are not letters; nor is a
  // non-ASCII byte folded.
  EXPECT_FALSE(ascii_iequals("@", "`"));
  EXPECT_FALSE(ascii_iequals("\xC3\x84", "\xC3\xA4"));
}

}  // namespace
}  // namespace sandcastle
