// An elastic pool for request handlers: an idle worker takes a task at once;
// when none is idle a new one starts (up to a ceiling), so a slow call never
// waits behind another, and a quick one does not pay for a thread start.
// Workers idle for a while exit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>

namespace sandcastle {

class ElasticPool {
 public:
  explicit ElasticPool(size_t max_threads = 1024,
                       std::chrono::milliseconds idle_timeout = std::chrono::seconds(30));
  // Runs what is queued, then waits for every worker to exit.
  ~ElasticPool();
  ElasticPool(const ElasticPool&) = delete;
  ElasticPool& operator=(const ElasticPool&) = delete;

  void submit(std::function<void()> task);
  // Like submit, but only if a worker takes `task` at once (an idle one, or a
  // new one under the ceiling); false, with `task` left as it was, when it
  // would have to wait in the queue.
  bool try_submit(std::function<void()>& task);

  size_t threads() const;
  size_t idle() const;

  // The process-wide pool for request handlers.
  static ElasticPool& shared();

 private:
  void worker();

  const size_t max_threads_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable exited_cv_;
  bool stopping_ = false;
  std::deque<std::function<void()>> tasks_;
  size_t threads_ = 0;
  size_t idle_ = 0;
};

}  // namespace sandcastle
