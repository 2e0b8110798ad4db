// The resolver's caps on lookups in flight, the sharing of identical
// lookups, and the system resolver's thread pool.
#include <dirent.h>
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <set>

#include "net/lookup_pool.h"
#include "net/resolver.h"
#include "unit/net/net_test_servers.h"
#include "unit/net/net_test_util.h"

namespace sandcastle::net {
namespace {

using namespace testing;  // NOLINT(google-build-using-namespace)
using Want = Resolver::Want;

using namespace test_util;  // ip(): an address literal

constexpr auto kWait = std::chrono::seconds(10);  // a broken build fails, never hangs

// Runs the loop until `done` says so or kWait passes.
template <typename Done>
bool run_until(boost::asio::io_context& io, Done done) {
  const auto until = std::chrono::steady_clock::now() + kWait;
  // Answers posted from the pool's threads count as work only once posted.
  auto guard = boost::asio::make_work_guard(io);
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < until)
    io.run_one_for(std::chrono::milliseconds(50));
  return done();
}

std::size_t thread_count() {
  std::size_t n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

std::string stalled_name(int i) {
  return "s" + std::to_string(i) + ".stall.test";
}

// Answers from the resolver, by the name asked.
struct Answers {
  std::map<std::string, Result<Resolved>> got;
  Resolver::Handler for_name(const std::string& name) {
    return [this, name](Result<Resolved> r) { got.insert_or_assign(name, std::move(r)); };
  }
  bool has(const std::string& name) const { return got.contains(name); }
};

class ResolverLimitsTest : public ::testing::Test {
 protected:
  DnsResponder dns_{{{"a.test", {ip("198.51.100.2")}}}, {}, false, ".stall.test"};
  boost::asio::io_context io_;
  int sandbox_a_ = 0, sandbox_b_ = 0;  // tenants: their addresses
};

TEST_F(ResolverLimitsTest, PastTheSandboxCapALookupFailsAtOnceAndOthersAreServed) {
  auto r = Resolver::make(io_, dns_.address());
  ASSERT_TRUE(r.ok());
  Answers a, b;
  for (int i = 0; i < static_cast<int>(kLookupsPerSandbox); ++i)
    (*r)->resolve_for(&sandbox_a_, stalled_name(i), Want::kV4, a.for_name(stalled_name(i)));
  const std::string over = stalled_name(static_cast<int>(kLookupsPerSandbox));
  (*r)->resolve_for(&sandbox_a_, over, Want::kV4, a.for_name(over));
  ASSERT_TRUE(run_until(io_, [&] { return a.has(over); }));
  ASSERT_FALSE(a.got.at(over).ok());
  EXPECT_EQ(a.got.at(over).error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(a.got.at(over).error().message(),
            "too many DNS lookups in flight for this sandbox (limit 32)");
  EXPECT_EQ(dns_.asked(over), 0);  // never sent
  EXPECT_EQ(a.got.size(), 1U);     // the 32 before it still wait

  // Another sandbox is not held up by the first one's stalled names.
  (*r)->resolve_for(&sandbox_b_, "a.test", Want::kV4, b.for_name("a.test"));
  ASSERT_TRUE(run_until(io_, [&] { return b.has("a.test"); }));
  ASSERT_TRUE(b.got.at("a.test").ok());
  EXPECT_EQ(b.got.at("a.test")->addrs, std::vector<IpAddr>{ip("198.51.100.2")});
  EXPECT_EQ(a.got.size(), 1U);
  EXPECT_EQ(dns_.asked(stalled_name(0)), 1);
}

TEST_F(ResolverLimitsTest, PastTheServerCapALookupFailsAndIdenticalOnesAreAskedOnce) {
  auto r = Resolver::make(io_, dns_.address(), ResolverLimits{.per_tenant = 32, .total = 2});
  ASSERT_TRUE(r.ok());
  Answers a, again, b;
  (*r)->resolve_for(&sandbox_a_, stalled_name(0), Want::kV4, a.for_name(stalled_name(0)));
  (*r)->resolve_for(&sandbox_b_, stalled_name(1), Want::kV4, b.for_name(stalled_name(1)));
  // The same question from the same sandbox waits for the one in flight.
  (*r)->resolve_for(&sandbox_a_, stalled_name(0), Want::kV4, again.for_name(stalled_name(0)));
  (*r)->resolve_for(nullptr, stalled_name(2), Want::kV4, a.for_name(stalled_name(2)));
  // Another sandbox's same question is a lookup of its own: past the cap.
  (*r)->resolve_for(&sandbox_b_, stalled_name(0), Want::kV4, b.for_name(stalled_name(0)));
  ASSERT_TRUE(run_until(io_, [&] { return a.has(stalled_name(2)) && b.has(stalled_name(0)); }));
  EXPECT_EQ(a.got.at(stalled_name(2)).error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(a.got.at(stalled_name(2)).error().message(),
            "too many DNS lookups in flight on this server (limit 2)");
  EXPECT_EQ(b.got.at(stalled_name(0)).error().code, ErrorCode::kResourceExhausted);
  EXPECT_FALSE(again.has(stalled_name(0)));
  EXPECT_EQ(dns_.asked(stalled_name(2)), 0);

  // Two waiters of one sandbox on one answering lookup: one question. The
  // other sandbox's is a lookup of its own, answered from the cache.
  auto fresh = Resolver::make(io_, dns_.address());
  ASSERT_TRUE(fresh.ok());
  Answers x, y, z;
  (*fresh)->resolve_for(&sandbox_a_, "a.test", Want::kV4, x.for_name("a.test"));
  (*fresh)->resolve_for(&sandbox_a_, "a.test", Want::kV4, y.for_name("a.test"));
  ASSERT_TRUE(run_until(io_, [&] { return x.has("a.test") && y.has("a.test"); }));
  EXPECT_TRUE(x.got.at("a.test").ok());
  EXPECT_TRUE(y.got.at("a.test").ok());
  EXPECT_EQ(dns_.asked("a.test"), 1);
  (*fresh)->resolve_for(&sandbox_b_, "a.test", Want::kV4, z.for_name("a.test"));
  ASSERT_TRUE(run_until(io_, [&] { return z.has("a.test"); }));
  EXPECT_TRUE(z.got.at("a.test").ok());
  EXPECT_EQ(dns_.asked("a.test"), 1);
  // The stalled lookup times out (2 x kResolverTries): then both of its
  // waiters are answered and the caps are free again.
  ASSERT_TRUE(run_until(io_, [&] { return a.has(stalled_name(0)) && again.has(stalled_name(0)); }));
  EXPECT_EQ(a.got.at(stalled_name(0)).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(again.got.at(stalled_name(0)).error().code, ErrorCode::kTimeout);
  EXPECT_EQ(dns_.asked(stalled_name(0)), kResolverTries);
}

TEST_F(ResolverLimitsTest, ASandboxAskingOneNameAgainUsesNoMoreOfItsCap) {
  auto r = Resolver::make(io_, dns_.address());
  ASSERT_TRUE(r.ok());
  int refused = 0;
  for (int i = 0; i < 200; ++i)  // 200 connections to one slow host at once
    (*r)->resolve_for(&sandbox_a_, stalled_name(0), Want::kBoth, [&](Result<Resolved> got) {
      if (!got.ok() && got.error().code == ErrorCode::kResourceExhausted) ++refused;
    });
  Answers a;
  for (int i = 1; i < static_cast<int>(kLookupsPerSandbox); ++i)
    (*r)->resolve_for(&sandbox_a_, stalled_name(i), Want::kV4, a.for_name(stalled_name(i)));
  const std::string over = stalled_name(static_cast<int>(kLookupsPerSandbox));
  (*r)->resolve_for(&sandbox_a_, over, Want::kV4, a.for_name(over));
  ASSERT_TRUE(run_until(io_, [&] { return a.has(over); }));
  EXPECT_EQ(a.got.at(over).error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(refused, 0);
  EXPECT_EQ(a.got.size(), 1U);
}

// getaddrinfo stand-in: names under .stall.test block until released.
class Blocker {
 public:
  Resolver::BlockingLookup lookup() {
    return [this](const std::string& name, Want) -> Result<Resolved> {
      std::unique_lock lock(mu_);
      if (name.ends_with(".stall.test")) {
        ++blocked_now_;
        max_blocked_ = std::max(max_blocked_, blocked_now_);
        cv_.notify_all();
        cv_.wait(lock, [&] { return released_; });
        --blocked_now_;
      }
      return Resolved{.addrs = {IpAddr::v4({198, 51, 100, 2})}, .ttl = std::chrono::seconds(30)};
    };
  }
  void wait_blocked(int n) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, kWait, [&] { return blocked_now_ >= n; });
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int max_blocked() {
    std::lock_guard lock(mu_);
    return max_blocked_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_now_ = 0, max_blocked_ = 0;
  bool released_ = false;
};

TEST_F(ResolverLimitsTest, OneSandboxsStalledSystemLookupsLeaveAThreadForOthers) {
  Blocker blocker;
  auto r = Resolver::make_system(io_, blocker.lookup());
  Answers a, b;
  for (int i = 0; i < static_cast<int>(kLookupsPerSandbox); ++i)
    r->resolve_for(&sandbox_a_, stalled_name(i), Want::kBoth, a.for_name(stalled_name(i)));
  blocker.wait_blocked(static_cast<int>(kSystemLookupThreadsPerSandbox));
  r->resolve_for(&sandbox_b_, "b.test", Want::kBoth, b.for_name("b.test"));
  ASSERT_TRUE(run_until(io_, [&] { return b.has("b.test"); }));
  EXPECT_TRUE(b.got.at("b.test").ok());
  EXPECT_TRUE(a.got.empty());
  EXPECT_EQ(blocker.max_blocked(), static_cast<int>(kSystemLookupThreadsPerSandbox));
  blocker.release();
  ASSERT_TRUE(run_until(io_, [&] { return a.got.size() == kLookupsPerSandbox; }));
  for (const auto& [name, got] : a.got) EXPECT_TRUE(got.ok()) << name;
  EXPECT_EQ(blocker.max_blocked(), static_cast<int>(kSystemLookupThreadsPerSandbox));
}

// A name both sandboxes ask, queued behind the first one's stalled names:
// the second is not made to wait in the first one's turn.
TEST_F(ResolverLimitsTest, ANameTwoSandboxesAskIsNotSharedAcrossThem) {
  Blocker blocker;
  auto r = Resolver::make_system(io_, blocker.lookup());
  Answers a, b;
  for (int i = 0; i < 8; ++i)
    r->resolve_for(&sandbox_a_, stalled_name(i), Want::kBoth, a.for_name(stalled_name(i)));
  blocker.wait_blocked(static_cast<int>(kSystemLookupThreadsPerSandbox));
  r->resolve_for(&sandbox_a_, "pypi.test", Want::kBoth, a.for_name("pypi.test"));
  r->resolve_for(&sandbox_b_, "pypi.test", Want::kBoth, b.for_name("pypi.test"));
  ASSERT_TRUE(run_until(io_, [&] { return b.has("pypi.test"); }));
  EXPECT_TRUE(b.got.at("pypi.test").ok());
  EXPECT_FALSE(a.has("pypi.test"));  // still behind its own stalled names
  blocker.release();
  ASSERT_TRUE(run_until(io_, [&] { return a.got.size() == 9; }));
}

TEST_F(ResolverLimitsTest, TheSystemResolverRunsOnAFixedPoolOfThreads) {
  const std::size_t before = thread_count();
  std::size_t most = 0;
  {
    auto r = Resolver::make(io_, "");  // getaddrinfo; numeric names need no DNS
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(thread_count(), before + kSystemLookupThreads);
    Answers got;
    for (int i = 1; i <= 200; ++i) {
      const std::string name = "127.0." + std::to_string(i / 100) + "." + std::to_string(i);
      (*r)->resolve_for(nullptr, name, Want::kV4, [&, name](Result<Resolved> res) {
        most = std::max(most, thread_count());
        got.got.insert_or_assign(name, std::move(res));
      });
    }
    ASSERT_TRUE(run_until(io_, [&] { return got.got.size() == 200; }));
    ASSERT_TRUE(got.got.at("127.0.1.150").ok());
    EXPECT_EQ(got.got.at("127.0.1.150")->addrs, std::vector<IpAddr>{ip("127.0.1.150")});
  }
  EXPECT_EQ(most, before + kSystemLookupThreads);
  EXPECT_EQ(thread_count(), before);  // joined with the resolver
}

TEST_F(ResolverLimitsTest, NoAnswerRunsOnceTheResolverIsGone) {
  Blocker blocker;
  auto r = Resolver::make_system(io_, blocker.lookup());
  int answered = 0;
  for (int i = 0; i < 8; ++i)
    r->resolve_for(&sandbox_a_, stalled_name(i), Want::kV4, [&](Result<Resolved>) { ++answered; });
  blocker.wait_blocked(static_cast<int>(kSystemLookupThreadsPerSandbox));
  blocker.release();  // the running ones post their answers to the loop...
  r.reset();          // ...which runs only after the resolver is gone
  io_.restart();
  io_.poll();
  EXPECT_EQ(answered, 0);
}

TEST(NetLookupPool, AFullQueueRefusesAndTenantsTakeTurns) {
  std::mutex mu;
  std::condition_variable cv;
  bool started = false, go = false;
  std::vector<int> order;
  int a = 0, b = 0;
  LookupPool pool(1, 1, 4);
  // The one thread blocks on a's first job; the rest queue up behind it.
  ASSERT_TRUE(pool.submit(&a, [&] {
    std::unique_lock lock(mu);
    started = true;
    cv.notify_all();
    cv.wait(lock, [&] { return go; });
  }));
  {
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return started; }));
  }
  auto note = [&](int v) {
    return [&, v] {
      std::lock_guard lock(mu);
      order.push_back(v);
      cv.notify_all();
    };
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.submit(&a, note(i)));
  ASSERT_TRUE(pool.submit(&b, note(100)));
  EXPECT_FALSE(pool.submit(&b, [] {}));  // 4 queued: full
  std::unique_lock lock(mu);
  go = true;
  cv.notify_all();
  ASSERT_TRUE(cv.wait_for(lock, kWait, [&] { return order.size() == 4; }));
  // b's one job goes before a's second: tenants take turns.
  EXPECT_EQ(order, (std::vector<int>{0, 100, 1, 2}));
}

}  // namespace
}  // namespace sandcastle::net
