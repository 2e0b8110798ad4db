#include "mcp/request_context.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace sandcastle::mcp {
namespace {

// A small latch-like gate the test threads meet at.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false;
  bool released = false;
  bool unsubscribed = false;
};

// unsubscribe() racing a cancel() that is running the callback must not
// return until the callback has finished: callers capture their own stack.
TEST(CancelTokenTest, UnsubscribeWaitsForARunningCallback) {
  CancelToken token;
  Gate g;
  bool unsubscribed_while_running = true;
  size_t id = token.on_cancel([&] {
    std::unique_lock l(g.mu);
    g.entered = true;
    g.cv.notify_all();
    g.cv.wait(l, [&] { return g.released; });
    unsubscribed_while_running = g.unsubscribed;
  });
  std::thread canceller([&] { token.cancel(); });
  {
    std::unique_lock l(g.mu);
    g.cv.wait(l, [&] { return g.entered; });
  }
  std::thread unsubscriber([&] {
    token.unsubscribe(id);
    std::lock_guard l(g.mu);
    g.unsubscribed = true;
    g.cv.notify_all();
  });
  {
    // Give a broken unsubscribe every chance to return early; a correct
    // one stays blocked, so this wait ends by its deadline.
    std::unique_lock l(g.mu);
    EXPECT_FALSE(g.cv.wait_for(l, std::chrono::milliseconds(200), [&] { return g.unsubscribed; }));
    g.released = true;
    g.cv.notify_all();
  }
  canceller.join();
  unsubscriber.join();
  EXPECT_FALSE(unsubscribed_while_running);
  EXPECT_TRUE(g.unsubscribed);
}

TEST(CancelTokenTest, CallbackMayUnsubscribeItself) {
  CancelToken token;
  size_t id = 0;
  int runs = 0;
  id = token.on_cancel([&] {
    ++runs;
    token.unsubscribe(id);  // would deadlock if it waited for itself
  });
  token.cancel();
  token.cancel();
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE(token.cancelled());
}

TEST(CancelTokenTest, RegisteringAfterCancelRunsAtOnce) {
  CancelToken token;
  token.cancel();
  int runs = 0;
  EXPECT_EQ(token.on_cancel([&] { ++runs; }), 0u);
  EXPECT_EQ(runs, 1);
  token.unsubscribe(0);
}

}  // namespace
}  // namespace sandcastle::mcp
