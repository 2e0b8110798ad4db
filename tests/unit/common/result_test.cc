#include "common/result.h"

#include <gtest/gtest.h>

namespace sandcastle {
namespace {

TEST(ResultTest, CarriesValueOrError) {
  Result<int> good = 42;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 42);

  Result<int> bad = Error::from_errno("mount /proc", EPERM);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kSystem);
  EXPECT_EQ(bad.error().sys_errno, EPERM);
  EXPECT_EQ(bad.error().message(), "mount /proc: Operation not permitted (EPERM)");
}

TEST(ResultTest, StatusWithoutErrno) {
  Status s = Error::make(ErrorCode::kNotFound, "sandbox abc");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "sandbox abc");
  EXPECT_TRUE(ok_status().ok());
}

}  // namespace
}  // namespace sandcastle
