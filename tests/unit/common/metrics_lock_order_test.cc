// A callback gauge may take its owner's lock (the sandbox manager's live
// count does), while that owner asks the registry for a counter under the
// same lock (a create counts itself). A /metrics scrape at that moment must
// not deadlock: render() calls callbacks without its own lock held. (TSan
// reported the lock-order inversion between SandboxManager::create and
// Registry::render over HTTP.)
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "common/metrics.h"

namespace sandcastle::metrics {
namespace {

TEST(MetricsLockOrder, ScrapeWhileTheGaugeOwnerCountsUnderItsLockDoesNotDeadlock) {
  // Leaked on purpose: on a deadlock the threads below are left blocked on them.
  struct Shared {
    Registry registry;
    std::mutex owner_mu;  // the gauge owner's lock
    std::mutex flag_mu;
    std::condition_variable flag_cv;
    bool in_callback = false;
  };
  auto* s = new Shared;
  s->registry.gauge_fn("owned_things", "things the owner holds", [s] {
    {
      std::lock_guard l(s->flag_mu);
      s->in_callback = true;
    }
    s->flag_cv.notify_all();
    std::lock_guard owner(s->owner_mu);
    return 1.0;
  });

  std::unique_lock owner(s->owner_mu);
  std::promise<std::string> scraped;
  auto page = scraped.get_future();
  std::thread([s, p = std::move(scraped)]() mutable { p.set_value(s->registry.render()); }).detach();
  {
    // The scrape is inside the callback, waiting for the owner's lock.
    std::unique_lock l(s->flag_mu);
    s->flag_cv.wait(l, [s] { return s->in_callback; });
  }
  // The owner counts something while holding its lock.
  std::promise<void> counted;
  auto done = counted.get_future();
  std::thread([s, p = std::move(counted)]() mutable {
    s->registry.counter("things_created_total", "things created").inc();
    p.set_value();
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(5)), std::future_status::ready)
      << "counter() blocked behind render(): lock-order deadlock";
  owner.unlock();
  ASSERT_EQ(page.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  std::string text = page.get();
  EXPECT_NE(text.find("owned_things 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE things_created_total counter"), std::string::npos) << text;
  delete s;
}

}  // namespace
}  // namespace sandcastle::metrics
