// Helpers the network unit tests share (one definition each, so the files
// can be compiled together in a unity batch).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "net/address.h"
#include "net/rules.h"

namespace sandcastle::net::test_util {

// An address literal the test knows to be valid.
inline IpAddr ip(const char* text) {
  return IpAddr::parse(text).value();
}

// An allow-list policy of `allow`; a rule the parser refuses fails the test.
inline std::shared_ptr<const Policy> allow_policy(const std::vector<std::string>& allow) {
  auto p = make_policy(Mode::kAllowList, allow, {});
  EXPECT_TRUE(p.ok()) << p.error().message();
  return p.ok() ? *p : std::make_shared<const Policy>();
}

}  // namespace sandcastle::net::test_util
