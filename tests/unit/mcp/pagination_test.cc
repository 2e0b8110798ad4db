#include "mcp/pagination.h"

#include <gtest/gtest.h>

#include "common/base64.h"

namespace sandcastle::mcp {
namespace {

TEST(PaginationTest, CursorRoundTrips) {
  for (size_t off : {0u, 1u, 99u, 123456u}) {
    auto c = encode_cursor("tools", off);
    auto back = decode_cursor("tools", c);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, off);
  }
}

TEST(PaginationTest, RejectsForeignOrTamperedCursors) {
  auto c = encode_cursor("tools", 5);
  EXPECT_FALSE(decode_cursor("prompts", c));
  EXPECT_FALSE(decode_cursor("tools", "not a cursor!"));
  EXPECT_FALSE(decode_cursor("tools", ""));
  EXPECT_FALSE(decode_cursor("tools", base64_encode("tools:6:1", true)));
  std::string flipped = c;
  flipped[2] = flipped[2] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(decode_cursor("tools", flipped));
  // Found by fuzzing: base64 decoding skips line breaks, a cursor must not.
  std::string wrapped = c.substr(0, 4) + "\n\n" + c.substr(4);
  EXPECT_FALSE(decode_cursor("tools", wrapped));
}

TEST(PaginationTest, Base64MatchesRfc4648) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode("\xff\xfe", true), "__4");
  EXPECT_EQ(*base64_decode("Zm9vYmE="), "fooba");
  EXPECT_EQ(*base64_decode("__4"), "\xff\xfe");
  EXPECT_FALSE(base64_decode("Zm9v!"));
  EXPECT_FALSE(base64_decode("Zg==Zg"));
}

}  // namespace
}  // namespace sandcastle::mcp
