// A sandbox whose processes die without a close (its init killed from
// outside, as a kill -9 of the zygote or the OOM killer would): the manager
// notices at the next call or reap, removes an ephemeral one and says why.
// (Persistent ones: tests/e2e/sandbox_death.test.mjs, with their storage.)
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../sandbox/fixture.h"
#include "sandbox/native/native_sandbox.h"
#include "service/sandbox_manager.h"

namespace sandcastle::service {
namespace {

class SandboxDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
  }
  static ManagerOptions opts() {
    ManagerOptions o;
    o.max_sandboxes = 4;
    return o;
  }
  std::shared_ptr<SandboxEntry> create(SandboxManager& m, const std::string& name) {
    CreateRequest r;
    r.language = "python";
    r.name = name;
    auto e = m.create(r);
    EXPECT_TRUE(e.ok()) << e.error().message();
    return e.ok() ? *e : nullptr;
  }
  // SIGKILL to the sandbox's init from outside, then waits until it is gone.
  static void kill_init(SandboxEntry& e) {
    auto* native = dynamic_cast<sandbox::native::NativeSandbox*>(&e.sandbox());
    ASSERT_NE(native, nullptr);
    const pid_t pid = native->init_pid();
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    ASSERT_GE(fd, 0) << "pidfd_open " << pid;
    ASSERT_EQ(::kill(pid, SIGKILL), 0);
    struct pollfd p {
      fd, POLLIN, 0
    };
    ASSERT_EQ(::poll(&p, 1, 10'000), 1) << "init " << pid << " did not die";
    ::close(fd);
  }
  sandbox::Backend* backend_ = nullptr;
};

sandbox::ExecRequest argv(std::vector<std::string> a) {
  sandbox::ExecRequest r;
  r.argv = std::move(a);
  return r;
}

TEST_F(SandboxDeathTest, AnEphemeralSandboxWhoseInitDiedIsRemovedAtTheNextCall) {
  SandboxManager m(*backend_, opts());
  auto dead = create(m, "doomed");
  auto other = create(m, "bystander");
  ASSERT_TRUE(dead && other);
  EXPECT_TRUE(dead->sandbox().alive());
  EXPECT_FALSE(m.ended_during_call(dead).has_value()) << "alive: a failure is the call's own";
  kill_init(*dead);
  EXPECT_FALSE(dead->sandbox().alive());

  auto got = m.get(dead->id(), "");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(got.error().message(),
            "sandbox '" + dead->id() + "' no longer exists: " + kEndedUnexpectedly);
  EXPECT_EQ(m.live_count(), 1u) << "its slot is free";
  EXPECT_FALSE(m.store().get(dead->id()).has_value()) << "its record is gone";
  // The other sandbox is untouched, and new ones start.
  auto r = (*m.get("bystander", ""))->sandbox().exec(argv({"/bin/echo", "ok"}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "ok\n");
  EXPECT_NE(create(m, "next"), nullptr);
}

TEST_F(SandboxDeathTest, TheReaperRemovesADeadSandboxAndACallInProgressIsToldWhy) {
  SandboxManager m(*backend_, opts());
  auto idle = create(m, "idle");
  auto busy = create(m, "busy");
  ASSERT_TRUE(idle && busy);
  kill_init(*idle);
  {
    EntryUse use(busy);  // a call in progress finds out itself
    kill_init(*busy);
    EXPECT_EQ(m.reap_expired(), 1u);
    EXPECT_EQ(m.live_count(), 1u);
    auto r = busy->sandbox().exec(argv({"/bin/true"}));
    ASSERT_FALSE(r.ok());
    auto why = m.ended_during_call(busy);
    ASSERT_TRUE(why.has_value());
    EXPECT_EQ(why->code, ErrorCode::kNotFound);
    EXPECT_EQ(why->message(),
              "sandbox '" + busy->id() + "' no longer exists: " + kEndedUnexpectedly);
  }
  EXPECT_EQ(m.live_count(), 0u);
  for (const auto& id : {idle->id(), busy->id()}) {
    auto got = m.get(id, "");
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.error().message().find("ended unexpectedly"), std::string::npos)
        << got.error().message();
  }
}

}  // namespace
}  // namespace sandcastle::service
