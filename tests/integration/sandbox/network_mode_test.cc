// Network modes other than "none" (issue 19) are not run by the native
// backend yet: a spec asking for one is refused with an exact error, before
// any sandbox or warm-pool shell is made for it.
#include "fixture.h"

namespace sandcastle::sandbox::testing {
namespace {

class NetworkModeTest : public SandboxTest {};

TEST_F(NetworkModeTest, OnlyModeNoneIsRun) {
  for (NetworkMode mode : {NetworkMode::kAllowList, NetworkMode::kFull}) {
    SpecOptions o;
    o.network = mode;
    o.network_allow = {"allowed.test"};
    auto spec = SandboxSpec::create(o);
    ASSERT_TRUE(spec.ok()) << spec.error().message();
    auto sb = backend_->create(*spec);
    ASSERT_FALSE(sb.ok()) << network_mode_name(mode);
    EXPECT_EQ(sb.error().code, ErrorCode::kInvalidArgument);
    EXPECT_EQ(sb.error().context, "native backend: only network mode \"none\"");
  }
  // Rules alone change nothing for mode none.
  SpecOptions o;
  o.network_deny = {"evil.test"};
  auto sb = make(o);
  ASSERT_TRUE(sb);
}

}  // namespace
}  // namespace sandcastle::sandbox::testing
