#include "common/thread_pool.h"

#include <thread>

namespace sandcastle {

ElasticPool::ElasticPool(size_t max_threads, std::chrono::milliseconds idle_timeout)
    : max_threads_(max_threads), idle_timeout_(idle_timeout) {}

ElasticPool::~ElasticPool() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  exited_cv_.wait(lock, [this] { return threads_ == 0; });
}

ElasticPool& ElasticPool::shared() {
  // Never destroyed: detached workers may still run while the process exits.
  static ElasticPool* pool = new ElasticPool();
  return *pool;
}

void ElasticPool::submit(std::function<void()> task) {
  std::unique_lock lock(mu_);
  tasks_.push_back(std::move(task));
  // Start a worker unless enough idle ones are there for every queued task.
  if (idle_ < tasks_.size() && threads_ < max_threads_) {
    ++threads_;
    lock.unlock();
    std::thread([this] { worker(); }).detach();
    return;
  }
  lock.unlock();
  cv_.notify_one();
}

bool ElasticPool::try_submit(std::function<void()>& task) {
  std::unique_lock lock(mu_);
  const bool idle_one = idle_ > tasks_.size();
  if (!idle_one && threads_ >= max_threads_) return false;
  tasks_.push_back(std::move(task));
  if (!idle_one) {
    ++threads_;
    lock.unlock();
    std::thread([this] { worker(); }).detach();
    return true;
  }
  lock.unlock();
  cv_.notify_one();
  return true;
}

void ElasticPool::worker() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    bool got = cv_.wait_for(lock, idle_timeout_, [this] { return !tasks_.empty() || stopping_; });
    --idle_;
    if (!got || tasks_.empty()) {  // idle too long, or the pool is going away
      --threads_;
      exited_cv_.notify_all();
      return;
    }
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    task = nullptr;  // release captures before idling
    lock.lock();
  }
}

size_t ElasticPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_;
}

size_t ElasticPool::idle() const {
  std::lock_guard lock(mu_);
  return idle_;
}

}  // namespace sandcastle
