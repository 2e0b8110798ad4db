// The sandbox event feed: owner filtering, a wake per batch, overflow that
// drops and asks for a resync, and no wake after unsubscribing.
#include "service/sandbox_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace sandcastle::service {
namespace {

SandboxEvent ev(const std::string& id, const std::string& owner,
                SandboxEvent::Kind k = SandboxEvent::Kind::kCreated) {
  SandboxEvent e;
  e.kind = k;
  e.sandbox_id = id;
  e.owner = owner;
  return e;
}

TEST(SandboxEventsTest, OwnerFilterAndAdminSeesAll) {
  SandboxEvents feed;
  auto alice = feed.subscribe(std::string("alice"), [] {});
  auto admin = feed.subscribe(std::nullopt, [] {});
  feed.publish(ev("sb-1", "alice"));
  feed.publish(ev("sb-2", "bob"));
  auto a = alice->drain();
  ASSERT_EQ(a.events.size(), 1u);
  EXPECT_EQ(a.events[0].sandbox_id, "sb-1");
  EXPECT_FALSE(a.resync);
  auto all = admin->drain();
  ASSERT_EQ(all.events.size(), 2u);
  EXPECT_EQ(all.events[1].sandbox_id, "sb-2");
  EXPECT_TRUE(alice->drain().events.empty());
}

TEST(SandboxEventsTest, WakesOncePerBatch) {
  SandboxEvents feed;
  int wakes = 0;
  auto sub = feed.subscribe(std::string(""), [&] { ++wakes; });
  feed.publish(ev("sb-1", ""));
  feed.publish(ev("sb-1", "", SandboxEvent::Kind::kChanged));
  EXPECT_EQ(wakes, 1);  // the second found the queue non-empty
  EXPECT_EQ(sub->drain().events.size(), 2u);
  feed.publish(ev("sb-1", "", SandboxEvent::Kind::kRemoved));
  EXPECT_EQ(wakes, 2);
  auto b = sub->drain();
  ASSERT_EQ(b.events.size(), 1u);
  EXPECT_EQ(b.events[0].kind, SandboxEvent::Kind::kRemoved);
  EXPECT_STREQ(sandbox_event_kind_name(b.events[0].kind), "removed");
}

TEST(SandboxEventsTest, SlowSubscriberDropsAndResyncs) {
  SandboxEvents feed(4);
  int wakes = 0;
  auto slow = feed.subscribe(std::nullopt, [&] { ++wakes; });
  auto fast = feed.subscribe(std::nullopt, [] {});
  for (int i = 0; i < 10; ++i) {
    feed.publish(ev("sb-" + std::to_string(i), ""));
    if (i % 2) (void)fast->drain();  // keeps up: never overflows
  }
  EXPECT_EQ(wakes, 2);  // the first event, then the overflow
  auto b = slow->drain();
  EXPECT_TRUE(b.resync);
  EXPECT_TRUE(b.events.empty());  // events after the overflow are dropped until it drains
  feed.publish(ev("sb-10", ""));
  auto next = slow->drain();
  EXPECT_FALSE(next.resync);
  ASSERT_EQ(next.events.size(), 1u);
  EXPECT_EQ(next.events[0].sandbox_id, "sb-10");
  EXPECT_FALSE(fast->drain().resync);
}

TEST(SandboxEventsTest, NoWakeAfterUnsubscribe) {
  SandboxEvents feed;
  std::atomic<int> wakes{0};
  auto sub = feed.subscribe(std::nullopt, [&] { ++wakes; });
  EXPECT_EQ(feed.subscribers(), 1u);
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    for (int i = 0; !stop; ++i) feed.publish(ev("sb-" + std::to_string(i), ""));
  });
  while (wakes == 0) std::this_thread::yield();
  (void)sub->drain();  // empty again: the next publish would wake it
  sub.reset();         // waits out a wake in progress
  stop = true;
  publisher.join();
  const int after = wakes;
  feed.publish(ev("sb-last", ""));
  EXPECT_EQ(wakes, after);
  EXPECT_EQ(feed.subscribers(), 0u);
}

}  // namespace
}  // namespace sandcastle::service
