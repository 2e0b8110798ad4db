// AdmissionQueue: one-shot runs at the sandbox cap wait in a bounded line,
// round-robin between callers and first come first served within one; a
// waiter leaves with a clear error when its deadline passes, at once when
// the line is full, and when its request is cancelled.
#include "service/admission.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;
using Clock = AdmissionQueue::Clock;
using Take = AdmissionQueue::Take;

// The capacity a manager would have: `free` server slots and per-caller
// quotas; records who got a slot, in order.
struct Slots {
  std::mutex mu;
  std::condition_variable cv;
  int free = 0;
  std::map<std::string, int> quota_left;  // absent: no quota
  std::vector<std::string> served;
  std::map<std::string, std::vector<size_t>> places;  // each waiter's reported places

  // Records the taker here, in the order slots were taken (the waiters'
  // threads return from admit() in any order).
  Take take(const std::string& caller, const std::string& tag) {
    std::lock_guard l(mu);
    if (free <= 0) return Take::kServerFull;
    if (auto it = quota_left.find(caller); it != quota_left.end()) {
      if (it->second <= 0) return Take::kCallerFull;
      --it->second;
    }
    --free;
    served.push_back(tag);
    cv.notify_all();
    return Take::kTaken;
  }
  void give(AdmissionQueue& q, int n = 1) {
    {
      std::lock_guard l(mu);
      free += n;
    }
    q.notify();
  }
  template <class Pred>
  void wait_for(Pred p) {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 10s, p)) << "timed out waiting for the queue";
  }
};

AdmissionQueue::Request request(Slots& s, const std::string& caller, const std::string& tag,
                                Clock::duration wait = 30s, sandcastle::CancelToken* cancel = nullptr) {
  AdmissionQueue::Request r;
  r.caller = caller;
  r.deadline = Clock::now() + wait;
  r.try_take = [&s, caller, tag] { return s.take(caller, tag); };
  r.cancel = cancel;
  r.on_queued = [&s, tag](size_t pos, size_t) {
    std::lock_guard l(s.mu);
    s.places[tag].push_back(pos);
    s.cv.notify_all();
  };
  r.describe_full = [](Take why) {
    return std::string(why == Take::kCallerFull ? "caller quota reached" : "server full (cap 3)");
  };
  return r;
}

// Starts a waiter and returns once it is in line (its first place reported).
std::thread enqueue(AdmissionQueue& q, Slots& s, const std::string& caller,
                    const std::string& tag) {
  std::thread t([&q, &s, caller, tag] {
    Status st = q.admit(request(s, caller, tag));
    EXPECT_TRUE(st.ok()) << tag << ": " << st.error().message();
  });
  s.wait_for([&] { return s.places.count(tag) > 0; });
  return t;
}

TEST(AdmissionQueue, AFreeSlotIsTakenAtOnceWithoutQueueing) {
  AdmissionQueue q(8);
  Slots s;
  s.free = 1;
  ASSERT_TRUE(q.admit(request(s, "a", "a1")).ok());
  EXPECT_TRUE(s.places.empty()) << "no queued notification when nothing waited";
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(AdmissionQueue, RoundRobinBetweenCallersFifoWithinOne) {
  AdmissionQueue q(64);
  Slots s;
  std::vector<std::thread> ts;
  for (const char* tag : {"A1", "A2", "A3", "A4"}) ts.push_back(enqueue(q, s, "alice", tag));
  for (const char* tag : {"B1", "B2"}) ts.push_back(enqueue(q, s, "bob", tag));
  ts.push_back(enqueue(q, s, "carol", "C1"));
  EXPECT_EQ(q.waiting(), 7u);
  // Places on joining: alice's burst does not push bob or carol behind it.
  EXPECT_EQ(s.places["A1"].front(), 1u);
  EXPECT_EQ(s.places["A4"].front(), 4u);
  EXPECT_EQ(s.places["B1"].front(), 2u);
  EXPECT_EQ(s.places["C1"].front(), 3u);
  EXPECT_EQ(s.places["B2"].front(), 4u);  // A1 B1 A2 B2, before carol came
  for (size_t i = 1; i <= 7; ++i) {
    s.give(q);
    s.wait_for([&] { return s.served.size() == i; });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.served, (std::vector<std::string>{"A1", "B1", "C1", "A2", "B2", "A3", "A4"}));
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(AdmissionQueue, SeveralFreedSlotsAdmitSeveralWaiters) {
  AdmissionQueue q(64);
  Slots s;
  std::vector<std::thread> ts;
  for (int i = 0; i < 5; ++i) ts.push_back(enqueue(q, s, "alice", std::string("A").append(std::to_string(i))));
  s.give(q, 3);
  s.wait_for([&] { return s.served.size() == 3; });
  s.give(q, 2);
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.served, (std::vector<std::string>{"A0", "A1", "A2", "A3", "A4"}));
}

TEST(AdmissionQueue, AWaiterLeavesWhenItsDeadlinePassesSayingWhy) {
  AdmissionQueue q(64);
  Slots s;
  const auto t0 = Clock::now();
  Status st = q.admit(request(s, "alice", "A1", 300ms));
  const auto waited = Clock::now() - t0;
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  EXPECT_GE(waited, 300ms);
  EXPECT_LT(waited, 5s);
  const std::string m = st.error().message();
  EXPECT_NE(m.find("server full (cap 3)"), std::string::npos) << m;
  EXPECT_NE(m.find("waited 0."), std::string::npos) << m;  // 0.3 s, give or take scheduling
  EXPECT_NE(m.find("place 1 of 1"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-sandboxes"), std::string::npos) << m;
  EXPECT_NE(m.find("timeout_s"), std::string::npos) << m;
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(AdmissionQueue, AFullLineRefusesAtOnce) {
  AdmissionQueue q(2);
  Slots s;
  std::vector<std::thread> ts;
  ts.push_back(enqueue(q, s, "alice", "A1"));
  ts.push_back(enqueue(q, s, "bob", "B1"));
  const auto t0 = Clock::now();
  Status st = q.admit(request(s, "carol", "C1"));
  EXPECT_LT(Clock::now() - t0, 1s) << "a full line must not make the caller wait";
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kResourceExhausted);
  const std::string m = st.error().message();
  EXPECT_NE(m.find("server full (cap 3)"), std::string::npos) << m;
  EXPECT_NE(m.find("2 one-shot runs already wait"), std::string::npos) << m;
  EXPECT_NE(m.find("--max-queued-runs 2"), std::string::npos) << m;
  EXPECT_EQ(s.places.count("C1"), 0u);
  s.give(q, 2);
  for (auto& t : ts) t.join();
}

TEST(AdmissionQueue, NoLineMeansRefuseAtOnce) {
  AdmissionQueue q(0);
  Slots s;
  Status st = q.admit(request(s, "alice", "A1"));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("--max-queued-runs 0"), std::string::npos)
      << st.error().message();
  s.free = 1;
  EXPECT_TRUE(q.admit(request(s, "alice", "A2")).ok());
}

TEST(AdmissionQueue, CancellationRemovesTheWaiterAndTheNextOneMovesUp) {
  AdmissionQueue q(64);
  Slots s;
  sandcastle::CancelToken token;
  Status first;
  std::thread t1([&] {
    first = q.admit(request(s, "alice", "A1", 30s, &token));
    std::lock_guard l(s.mu);
    s.served.push_back("A1-returned");
    s.cv.notify_all();
  });
  s.wait_for([&] { return s.places.count("A1") > 0; });
  auto t2 = enqueue(q, s, "alice", "A2");
  EXPECT_EQ(s.places["A2"].front(), 2u);
  token.cancel();
  s.wait_for([&] { return !s.served.empty(); });
  t1.join();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(q.waiting(), 1u);
  s.give(q);
  t2.join();
  EXPECT_EQ(s.served, (std::vector<std::string>{"A1-returned", "A2"}));
}

TEST(AdmissionQueue, AnAlreadyCancelledRequestDoesNotQueue) {
  AdmissionQueue q(64);
  Slots s;
  sandcastle::CancelToken token;
  token.cancel();
  Status st = q.admit(request(s, "alice", "A1", 30s, &token));
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(q.waiting(), 0u);
}

TEST(AdmissionQueue, ACallerAtItsQuotaDoesNotHoldUpOthers) {
  AdmissionQueue q(64);
  Slots s;
  s.quota_left["alice"] = 0;
  std::vector<std::thread> ts;
  ts.push_back(enqueue(q, s, "alice", "A1"));
  ts.push_back(enqueue(q, s, "bob", "B1"));
  s.give(q, 1);  // a server slot, but alice is at her quota
  s.wait_for([&] { return s.served.size() == 1; });
  EXPECT_EQ(s.served.front(), "B1");
  {
    std::lock_guard l(s.mu);
    s.quota_left["alice"] = 1;
  }
  s.give(q, 1);
  for (auto& t : ts) t.join();
  EXPECT_EQ(s.served, (std::vector<std::string>{"B1", "A1"}));
}

TEST(AdmissionQueue, WaitersHearTheirPlaceAsTheLineMoves) {
  AdmissionQueue q(64, 5ms);
  Slots s;
  std::vector<std::thread> ts;
  for (const char* tag : {"A1", "A2", "A3"}) ts.push_back(enqueue(q, s, "alice", tag));
  s.give(q);
  s.wait_for([&] { return s.served.size() == 1 && s.places["A3"].size() >= 2; });
  EXPECT_EQ(s.places["A3"], (std::vector<size_t>{3, 2}));
  s.give(q);
  s.wait_for([&] { return s.served.size() == 2 && s.places["A3"].size() >= 3; });
  EXPECT_EQ(s.places["A3"], (std::vector<size_t>{3, 2, 1}));
  s.give(q);
  for (auto& t : ts) t.join();
}

}  // namespace
}  // namespace sandcastle::service
