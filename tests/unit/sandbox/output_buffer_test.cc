#include "sandbox/output_buffer.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox {
namespace {

TEST(OutputBuffer, KeepsEverythingUnderTheCap) {
  OutputBuffer b(10);
  b.append("abc");
  b.append("def");
  EXPECT_FALSE(b.truncated());
  EXPECT_EQ(b.total(), 6u);
  EXPECT_EQ(b.take(), "abcdef");
}

TEST(OutputBuffer, ExactlyAtCapIsNotTruncated) {
  OutputBuffer b(6);
  b.append("abcdef");
  EXPECT_FALSE(b.truncated());
  EXPECT_EQ(b.take(), "abcdef");
}

TEST(OutputBuffer, KeepsHeadAndTailAcrossManyChunks) {
  OutputBuffer b(8);
  std::string all;
  for (char c = 'a'; c <= 'z'; ++c) {
    b.append(std::string(1, c));
    all += c;
  }
  EXPECT_TRUE(b.truncated());
  EXPECT_EQ(b.total(), 26u);
  EXPECT_EQ(b.take(), "abcd\n[... 18 bytes truncated ...]\nwxyz");
}

TEST(OutputBuffer, OneHugeChunk) {
  OutputBuffer b(4);
  b.append(std::string(1000, 'x') + "END");
  EXPECT_EQ(b.take(), "xx\n[... 999 bytes truncated ...]\nND");
}

TEST(OutputBuffer, BinarySafe) {
  OutputBuffer b(100);
  std::string bin("\0\xff\0", 3);
  b.append(bin);
  EXPECT_EQ(b.take(), bin);
}

}  // namespace
}  // namespace sandcastle::sandbox
