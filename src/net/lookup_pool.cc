#include "net/lookup_pool.h"

#include <algorithm>
#include <utility>

namespace sandcastle::net {

LookupPool::LookupPool(std::size_t threads, std::size_t per_tenant, std::size_t max_queued)
    : per_tenant_(std::clamp<std::size_t>(per_tenant, 1, std::max<std::size_t>(threads, 1))),
      max_queued_(max_queued) {
  threads = std::max<std::size_t>(threads, 1);
  threads_.reserve(threads);
  for (std::size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { work(); });
}

LookupPool::~LookupPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    queues_.clear();  // the queued jobs' captures go on this thread
    turn_.clear();
    queued_ = 0;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

bool LookupPool::submit(Tenant tenant, Job job) {
  {
    std::lock_guard lock(mu_);
    if (stop_ || queued_ >= max_queued_) return false;
    Queue& q = queues_[tenant];
    if (q.jobs.empty()) turn_.push_back(tenant);
    q.jobs.push_back(std::move(job));
    ++queued_;
  }
  cv_.notify_one();
  return true;
}

bool LookupPool::next_job(Tenant& tenant, Job& job) {
  for (auto it = turn_.begin(); it != turn_.end(); ++it) {
    Queue& q = queues_[*it];
    if (q.busy >= per_tenant_) continue;
    tenant = *it;
    job = std::move(q.jobs.front());
    q.jobs.pop_front();
    --queued_;
    ++q.busy;
    turn_.erase(it);
    // To the back of the line: the other tenants go first next time.
    if (!q.jobs.empty()) turn_.push_back(tenant);
    return true;
  }
  return false;
}

void LookupPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    Tenant tenant = nullptr;
    Job job;
    cv_.wait(lock, [&] { return stop_ || next_job(tenant, job); });
    if (stop_) return;
    lock.unlock();
    job();
    job = nullptr;  // its captures go before the lock is taken again
    lock.lock();
    auto it = queues_.find(tenant);
    if (it == queues_.end()) continue;  // cleared by the destructor
    --it->second.busy;
    if (it->second.busy == 0 && it->second.jobs.empty()) queues_.erase(it);
    // A tenant at its thread limit may run again now.
    cv_.notify_all();
  }
}

}  // namespace sandcastle::net
