// The one CancelToken (common/cancel_token.h): its channel ends a sandbox's
// exec or an engine's HTTP call (each backend's use of it is tested with the
// real thing: tests/integration/sandbox/exec_test.cc,
// tests/integration/engine/engine_client_test.cc); its callbacks carry an MCP
// request's cancellation (tests/unit/mcp/session_test.cc).
#include "common/cancel_token.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mcp/request_context.h"
#include "sandbox/sandbox.h"
#include "service/sandboxes.h"

namespace sandcastle {
namespace {

using Signal = CancelToken::Signal;

static_assert(std::is_same_v<sandbox::CancelToken, CancelToken>, "one token type");
static_assert(std::is_same_v<service::CancelToken, CancelToken>, "one token type");
// The MCP session hands its request's token to the handler as is.
static_assert(
    std::is_same_v<decltype(std::declval<mcp::RequestContext>().cancel_token()), CancelToken*>,
    "one token type");

TEST(CommonCancelToken, ACancelFromBeforeTheWorkStartedIsSeen) {
  CancelToken token;
  token.cancel();
  std::vector<Signal> got;
  token.set_channel([&](Signal s) {
    got.push_back(s);
    return true;
  });
  EXPECT_TRUE(token.cancelled());
  EXPECT_TRUE(got.empty());  // the work checks cancelled() after setting its channel
  token.set_channel(nullptr);
}

TEST(CommonCancelToken, CancelAndInterruptReachTheRunningWorkFromAnotherThread) {
  CancelToken token;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Signal> got;
  token.set_channel([&](Signal s) {
    std::lock_guard l(mu);
    got.push_back(s);
    cv.notify_all();
    return true;
  });
  std::thread t([&] {
    EXPECT_TRUE(token.interrupt());
    token.cancel();
  });
  {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return got.size() == 2; });
  }
  t.join();
  EXPECT_EQ(got, (std::vector<Signal>{Signal::kInterrupt, Signal::kCancel}));
  EXPECT_TRUE(token.cancelled());
  token.set_channel(nullptr);
}

TEST(CommonCancelToken, InterruptSaysWhetherItWasDelivered) {
  CancelToken token;
  EXPECT_FALSE(token.interrupt());  // nothing runs
  // An HTTP call has nothing to interrupt: its channel says no.
  token.set_channel([](Signal s) { return s == Signal::kCancel; });
  EXPECT_FALSE(token.interrupt());
  EXPECT_FALSE(token.cancelled());
  token.set_channel(nullptr);
  EXPECT_FALSE(token.interrupt());
}

TEST(CommonCancelToken, AnEndedWorksChannelIsNotCalled) {
  CancelToken token;
  int calls = 0;
  token.set_channel([&](Signal) { return ++calls > 0; });
  token.set_channel(nullptr);
  token.cancel();
  EXPECT_FALSE(token.interrupt());
  EXPECT_EQ(calls, 0);
  EXPECT_TRUE(token.cancelled());
}

// The work clears its channel as it ends, and then its stack is gone: the
// clear must wait for a cancel() that is inside the channel.
TEST(CommonCancelToken, ClearingWaitsForADeliveryInProgress) {
  CancelToken token;
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, released = false, cleared = false;
  token.set_channel([&](Signal) {
    std::unique_lock l(mu);
    entered = true;
    cv.notify_all();
    cv.wait(l, [&] { return released; });
    EXPECT_FALSE(cleared);
    return true;
  });
  std::thread canceller([&] { token.cancel(); });
  {
    std::unique_lock l(mu);
    cv.wait(l, [&] { return entered; });
  }
  std::thread clearer([&] {
    token.set_channel(nullptr);
    std::lock_guard l(mu);
    cleared = true;
  });
  {
    std::lock_guard l(mu);
    released = true;
    cv.notify_all();
  }
  canceller.join();
  clearer.join();
  EXPECT_TRUE(cleared);
}

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

// A request's cancel reaches both its subscribers and the work running
// with the token; the callbacks first, the channel after, each once.
TEST(CancelTokenTest, CancelRunsCallbacksAndTellsTheChannelOnce) {
  CancelToken token;
  std::vector<std::string> order;
  token.set_channel([&](Signal s) {
    order.push_back(s == Signal::kCancel ? "channel:cancel" : "channel:interrupt");
    return true;
  });
  token.on_cancel([&] { order.push_back("callback"); });
  EXPECT_TRUE(token.interrupt());  // no callback: an interrupt is not a cancel
  token.cancel();
  token.cancel();
  token.set_channel(nullptr);
  EXPECT_EQ(order, (std::vector<std::string>{"channel:interrupt", "callback", "channel:cancel"}));
}

TEST(CancelTokenTest, KeepHoldsObjectsAsLongAsTheToken) {
  auto obj = std::make_shared<int>(7);
  std::weak_ptr<int> weak = obj;
  {
    CancelToken token;
    token.keep(std::move(obj));
    EXPECT_FALSE(weak.expired());
  }
  EXPECT_TRUE(weak.expired());
}

}  // namespace
}  // namespace sandcastle
