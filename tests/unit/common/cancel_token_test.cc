// The one CancelToken (common/cancel_token.h) that both a sandbox's exec and
// an engine's HTTP call are ended with; each backend's use of it is tested
// with the real thing (tests/integration/sandbox/exec_test.cc,
// tests/integration/engine/engine_client_test.cc).
#include "common/cancel_token.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "sandbox/sandbox.h"

namespace sandcastle {
namespace {

using Signal = CancelToken::Signal;

static_assert(std::is_same_v<sandbox::CancelToken, CancelToken>, "one token type");

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

}  // namespace
}  // namespace sandcastle
