// SandboxManager against the real native backend: the cap, TTL reaping, the
// warm pool, lookup by name, and that owners never see each other's sandboxes.
#include "service/sandbox_manager.h"

#include "common/metrics.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "../sandbox/fixture.h"

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

sandbox::ExecRequest exec_argv(std::vector<std::string> a) {
  sandbox::ExecRequest r;
  r.argv = std::move(a);
  return r;
}

class SandboxManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
  }
  CreateRequest req(const std::string& owner = "", const std::string& name = "") {
    CreateRequest r;
    r.language = "python";
    r.owner = owner;
    r.name = name;
    return r;
  }
  // `pool` is ignored: the warm pool is the backend's (the shared backend
  // keeps two ready).
  static ManagerOptions opts(size_t max, size_t /*pool*/ = 0) {
    ManagerOptions o;
    o.max_sandboxes = max;
    return o;
  }
  sandbox::Backend* backend_ = nullptr;
};

TEST_F(SandboxManagerTest, CreateGetCloseAndUnknownIds) {
  SandboxManager m(*backend_, opts(4, 0));
  auto& created = metrics::registry().counter(metrics::name::kSandboxesCreated, "sandboxes created");
  auto& destroyed = metrics::registry().counter(metrics::name::kSandboxesDestroyed, "sandboxes destroyed");
  const double created0 = created.value(), destroyed0 = destroyed.value();
  auto e = m.create(req("", "work"));
  EXPECT_EQ(created.value(), created0 + 1);
  ASSERT_TRUE(e.ok()) << e.error().message();
  EXPECT_EQ((*e)->id().rfind("sb-", 0), 0u);
  EXPECT_EQ((*m.get("work", ""))->id(), (*e)->id());
  EXPECT_EQ((*m.get((*e)->id(), ""))->name(), "work");
  auto dup = m.create(req("", "work"));
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.error().code, ErrorCode::kAlreadyExists);

  auto r = (*e)->sandbox().exec(exec_argv({"/bin/echo", "alive"}));
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "alive\n");

  // The store records every live sandbox, ready for a persistent backend.
  auto rec = m.store().get((*e)->id());
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->name, "work");
  EXPECT_EQ(rec->language, "python");
  EXPECT_NE(rec->spec_json.find("\"memory_bytes\""), std::string::npos);
  ASSERT_TRUE(m.close("work", "").ok());
  EXPECT_FALSE(m.store().get((*e)->id()).has_value());
  EXPECT_EQ(destroyed.value(), destroyed0 + 1);
  EXPECT_EQ(m.get("work", "").error().code, ErrorCode::kNotFound);
  EXPECT_EQ(m.close("work", "").error().code, ErrorCode::kNotFound);
  // The destroyed sandbox refuses further work.
  EXPECT_FALSE((*e)->sandbox().exec(exec_argv({"/bin/true"})).ok());
  m.shutdown();
}

TEST_F(SandboxManagerTest, OwnersAreIsolated) {
  SandboxManager m(*backend_, opts(4, 0));
  auto a = m.create(req("alice", "box"));
  auto b = m.create(req("bob", "box"));  // same name, other owner: fine
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(m.list("alice").size(), 1u);
  EXPECT_EQ(m.list("bob").size(), 1u);
  // Bob cannot see, find or close Alice's sandbox — by id or by name.
  EXPECT_EQ(m.get((*a)->id(), "bob").error().code, ErrorCode::kNotFound);
  EXPECT_EQ((*m.get("box", "bob"))->id(), (*b)->id());
  EXPECT_EQ(m.close((*a)->id(), "bob").error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(m.get((*a)->id(), "alice").ok());
  m.shutdown();
}

TEST_F(SandboxManagerTest, CapIsEnforcedWithActionableError) {
  SandboxManager m(*backend_, opts(2, 0));
  ASSERT_TRUE(m.create(req()).ok());
  auto second = m.create(req());
  ASSERT_TRUE(second.ok());
  auto third = m.create(req());
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(third.error().context.find("close_sandbox"), std::string::npos);
  ASSERT_TRUE(m.close((*second)->id(), "").ok());
  EXPECT_TRUE(m.create(req()).ok());
  m.shutdown();
}

TEST_F(SandboxManagerTest, IdleSandboxesAreReapedButBusyOnesAreNot) {
  SandboxManager m(*backend_, opts(4, 0));
  auto idle_req = req("", "idle");
  idle_req.ttl = 1s;
  auto busy_req = req("", "busy");
  busy_req.ttl = 1s;
  auto idle = m.create(idle_req);
  auto busy = m.create(busy_req);
  ASSERT_TRUE(idle.ok() && busy.ok());
  {
    EntryUse use(*busy);  // an operation in progress
    std::this_thread::sleep_for(1100ms);
    EXPECT_EQ(m.reap_expired(), 1u);
  }
  EXPECT_EQ(m.get("idle", "").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(m.store().get((*idle)->id()).has_value());
  EXPECT_EQ(m.store().list()->size(), 1u);
  EXPECT_TRUE(m.get("busy", "").ok());
  EXPECT_FALSE((*idle)->sandbox().exec(exec_argv({"/bin/true"})).ok());
  m.shutdown();
}

TEST_F(SandboxManagerTest, RetiredSandboxesAreDestroyedOffThePath) {
  SandboxManager m(*backend_, opts(4, 0));
  m.start();
  auto e = m.create(req());
  ASSERT_TRUE(e.ok());
  std::string id = (*e)->id();
  m.retire(id, "");
  EXPECT_EQ(m.get(id, "").error().code, ErrorCode::kNotFound);  // gone from view at once
  // ...and destroyed by the manager's thread shortly after.
  bool destroyed = false;
  for (int i = 0; i < 200 && !destroyed; ++i) {
    destroyed = !(*e)->sandbox().exec(exec_argv({"/bin/true"})).ok();
    if (!destroyed) std::this_thread::sleep_for(10ms);
  }
  EXPECT_TRUE(destroyed);
  m.shutdown();
}

// Two refill threads must not both make "the last one": however fast the
// takes come, a pool of at most two never holds three.
TEST_F(SandboxManagerTest, BackToBackTakesNeverOverfillThePool) {
  auto* native = dynamic_cast<sandbox::native::NativeBackend*>(backend_);
  ASSERT_NE(native, nullptr);
  SandboxManager m(*backend_, opts(8));
  m.start();
  auto full = [](const sandbox::native::PoolStats& s) { return s.ready >= 2; };
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(native->wait_pool(full, 60s));
    auto e = m.create(req());  // one taken: both refill threads wake to make it again
    ASSERT_TRUE(e.ok()) << e.error().message();
    ASSERT_TRUE(native->wait_pool(full, 60s));
    ASSERT_TRUE(m.close((*e)->id(), "").ok());
  }
  EXPECT_LE(native->pool_stats().peak_ready, 2u);
  m.shutdown();
}

// The manager keeps no pool of its own: the backend's serves the default
// spec, and only it (a persistent create is refused, never answered with a
// pooled ephemeral sandbox as the manager's own pool once did).
TEST_F(SandboxManagerTest, WarmPoolServesOnlyTheWholeDefaultSpec) {
  auto* native = dynamic_cast<sandbox::native::NativeBackend*>(backend_);
  ASSERT_NE(native, nullptr);
  SandboxManager m(*backend_, opts(8));
  m.start();
  ASSERT_TRUE(native->wait_pool([](const sandbox::native::PoolStats& s) { return s.ready == 2; }, 60s));
  EXPECT_EQ(m.pool_ready(), 2u);
  auto taken = native->pool_stats().taken;
  auto e = m.create(req());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(native->pool_stats().taken, taken + 1);
  // A non-default spec bypasses the pool and still works.
  auto custom = req();
  custom.spec.limits.memory_bytes = 128 * sandbox::kMiB;
  taken = native->pool_stats().taken;
  auto c = m.create(custom);
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ((*c)->spec().limits().memory_bytes, 128 * sandbox::kMiB);
  EXPECT_EQ(native->pool_stats().taken, taken);
  auto persistent = req();
  persistent.spec.persistence = sandbox::Persistence::kPersistent;
  ASSERT_TRUE(native->wait_pool([](const sandbox::native::PoolStats& s) { return s.ready == 2; }, 60s));
  auto p = m.create(persistent);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(native->pool_stats().taken, taken);
  EXPECT_EQ(m.pool_ready(), 2u);
  m.shutdown();
  EXPECT_EQ(m.live_count(), 0u);
}

// A one-shot at the cap waits its turn (service/admission.h) where an explicit
// create refuses: it gets the slot a close frees, gives up at its deadline,
// and a shutdown lets it go with "shutting down".
TEST_F(SandboxManagerTest, OneShotsWaitForASlotAtTheCap) {
  SandboxManager m(*backend_, opts(1, 0));
  auto held = m.create(req());
  ASSERT_TRUE(held.ok()) << held.error().message();
  EXPECT_EQ(m.create(req()).error().code, ErrorCode::kResourceExhausted);

  std::promise<size_t> place;
  Result<std::shared_ptr<SandboxEntry>> waited = Error::make(ErrorCode::kInternal, "not run");
  std::thread t([&] {
    bool told = false;
    waited = m.create_when_free(req(), std::chrono::steady_clock::now() + 30s, nullptr, [&](size_t pos, size_t) {
      if (!told) place.set_value(pos);
      told = true;
    });
  });
  EXPECT_EQ(place.get_future().get(), 1u);
  EXPECT_EQ(m.runs_waiting(), 1u);
  ASSERT_TRUE(m.close((*held)->id(), "").ok());
  t.join();
  ASSERT_TRUE(waited.ok()) << waited.error().message();
  EXPECT_EQ(m.live_count(), 1u);

  const auto t0 = std::chrono::steady_clock::now();
  auto late = m.create_when_free(req(), t0 + 200ms, nullptr, nullptr);
  ASSERT_FALSE(late.ok());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 200ms);
  EXPECT_EQ(late.error().code, ErrorCode::kResourceExhausted);
  EXPECT_NE(late.error().context.find("maximum of 1 sandboxes; this one-shot run waited"), std::string::npos)
      << late.error().context;

  std::promise<void> queued;
  Result<std::shared_ptr<SandboxEntry>> stopped = Error::make(ErrorCode::kInternal, "not run");
  std::thread s([&] {
    bool told = false;
    stopped = m.create_when_free(req(), std::chrono::steady_clock::now() + 30s, nullptr, [&](size_t, size_t) {
      if (!told) queued.set_value();
      told = true;
    });
  });
  queued.get_future().get();
  m.shutdown();
  s.join();
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error().code, ErrorCode::kUnavailable);
  EXPECT_EQ(m.runs_waiting(), 0u);
}

}  // namespace
}  // namespace sandcastle::service
