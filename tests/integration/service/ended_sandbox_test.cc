// A sandbox that ended with its keyless HTTP session is reported as such,
// with how to keep sandboxes, not as a bare "not found".
#include <gtest/gtest.h>

#include "../sandbox/fixture.h"
#include "service/sandbox_manager.h"

namespace sandcastle::service {
namespace {

class EndedSandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
  }
  sandbox::Backend* backend_ = nullptr;
};

TEST_F(EndedSandboxTest, SessionEndIsTheReasonGiven) {
  SandboxManager m(*backend_, ManagerOptions{});
  CreateRequest req;
  req.language = "python";
  req.owner = "session:abc";
  auto e = m.create(req);
  ASSERT_TRUE(e.ok()) << e.error().message();
  const std::string id = (*e)->id();
  req.owner = "key:k1";
  auto keyed = m.create(req);
  ASSERT_TRUE(keyed.ok());
  const std::string keyed_id = (*keyed)->id();
  e->reset();
  keyed->reset();
  EXPECT_EQ(m.close_owned_by("session:abc"), 1u);
  // Asked from the next session (another owner), as a reconnecting client does.
  auto gone = m.get(id, "session:def");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().code, ErrorCode::kNotFound);
  const std::string msg = gone.error().message();
  EXPECT_NE(msg.find("no longer exists"), std::string::npos) << msg;
  EXPECT_NE(msg.find("HTTP session that created it ended"), std::string::npos) << msg;
  EXPECT_NE(msg.find("API key"), std::string::npos) << msg;
  // An explicit close is no session end; an unknown id keeps the plain message.
  ASSERT_TRUE(m.close(keyed_id, "key:k1").ok());
  EXPECT_EQ(m.get(keyed_id, "key:k1").error().message().find("session"), std::string::npos);
  EXPECT_EQ(m.get("sb-000000000000", "session:def").error().message().find("no longer exists"),
            std::string::npos);
  m.shutdown();
}

TEST_F(EndedSandboxTest, ReapingAfterTheTtlIsTheReasonGiven) {
  SandboxManager m(*backend_, ManagerOptions{});
  CreateRequest req;
  req.language = "python";
  req.ttl = std::chrono::seconds(0);  // idle past its TTL at once
  auto e = m.create(req);
  ASSERT_TRUE(e.ok()) << e.error().message();
  const std::string id = (*e)->id();
  e->reset();
  EXPECT_EQ(m.reap_expired(), 1u);
  auto gone = m.get(id, "");
  ASSERT_FALSE(gone.ok());
  EXPECT_NE(gone.error().message().find("idle for its TTL of 0 s"), std::string::npos)
      << gone.error().message();
  m.shutdown();
}

}  // namespace
}  // namespace sandcastle::service
