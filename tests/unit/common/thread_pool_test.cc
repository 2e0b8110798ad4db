#include "common/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

namespace sandcastle {
namespace {

using namespace std::chrono_literals;

TEST(ElasticPoolTest, SlowTasksDoNotBlockQuickOnes) {
  ElasticPool pool(16, 2s);
  std::promise<void> release;
  auto gate = release.get_future().share();
  for (int i = 0; i < 4; ++i) pool.submit([gate] { gate.wait(); });
  std::promise<void> quick;
  auto start = std::chrono::steady_clock::now();
  pool.submit([&quick] { quick.set_value(); });
  ASSERT_EQ(quick.get_future().wait_for(1s), std::future_status::ready);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  EXPECT_EQ(pool.threads(), 5u);
  release.set_value();
}

TEST(ElasticPoolTest, IdleWorkersAreReusedAndExpire) {
  ElasticPool pool(16, 200ms);
  std::atomic<int> done{0};
  for (int round = 0; round < 3; ++round) {
    pool.submit([&done] { ++done; });
    for (int i = 0; i < 100 && done.load() <= round; ++i) std::this_thread::sleep_for(1ms);
  }
  EXPECT_EQ(done.load(), 3);
  EXPECT_EQ(pool.threads(), 1u) << "sequential tasks reuse one idle worker";
  for (int i = 0; i < 100 && pool.threads() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(pool.threads(), 0u);
}

TEST(ElasticPoolTest, CeilingQueuesTheRest) {
  ElasticPool pool(2, 2s);
  std::promise<void> release;
  auto gate = release.get_future().share();
  std::atomic<int> done{0};
  for (int i = 0; i < 5; ++i) pool.submit([gate, &done] { gate.wait(); ++done; });
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(pool.threads(), 2u);
  EXPECT_EQ(done.load(), 0);
  release.set_value();
  for (int i = 0; i < 200 && done.load() < 5; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(done.load(), 5);
}

// try_submit hands a task over only if a worker takes it at once: with
// every worker busy at the ceiling it refuses and leaves the task callable.
TEST(ElasticPoolTest, TrySubmitTakesOnlyWhatRunsAtOnce) {
  ElasticPool pool(2, 2s);
  std::promise<void> release;
  auto gate = release.get_future().share();
  std::promise<void> started1, started2;
  pool.submit([gate, &started1] {
    started1.set_value();
    gate.wait();
  });
  std::function<void()> second = [gate, &started2] {
    started2.set_value();
    gate.wait();
  };
  ASSERT_TRUE(pool.try_submit(second)) << "under the ceiling a new worker takes it";
  ASSERT_EQ(started1.get_future().wait_for(1s), std::future_status::ready);
  ASSERT_EQ(started2.get_future().wait_for(1s), std::future_status::ready);
  std::atomic<int> ran{0};
  std::function<void()> third = [&ran] { ++ran; };
  EXPECT_FALSE(pool.try_submit(third));
  ASSERT_TRUE(third) << "a refused task is left as it was";
  release.set_value();
  for (int i = 0; i < 200 && pool.idle() < 2; ++i) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(pool.try_submit(third)) << "an idle worker takes it";
  for (int i = 0; i < 200 && ran.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  EXPECT_EQ(ran.load(), 1);
  EXPECT_EQ(pool.threads(), 2u);
}

}  // namespace
}  // namespace sandcastle
