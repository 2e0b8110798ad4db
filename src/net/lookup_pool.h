// A fixed pool of threads for blocking lookups (getaddrinfo), shared fairly
// between tenants: each tenant has its own queue, the threads take from
// them in turn, and no tenant holds more than `per_tenant` threads at once,
// so a tenant whose lookups stall (a name whose server never answers)
// leaves the other tenants a thread. No thread per lookup; the queue is
// bounded.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace sandcastle::net {

class LookupPool {
 public:
  using Tenant = const void*;
  using Job = std::function<void()>;  // runs on a pool thread

  // threads >= 1; per_tenant in [1, threads]; max_queued jobs waiting in all.
  LookupPool(std::size_t threads, std::size_t per_tenant, std::size_t max_queued);
  // Drops the jobs still queued and joins the threads (waiting for the jobs
  // they are running: at most one blocking call each).
  ~LookupPool();
  LookupPool(const LookupPool&) = delete;
  LookupPool& operator=(const LookupPool&) = delete;

  // False when the queue is full (the job is not taken). Any thread.
  bool submit(Tenant tenant, Job job);
  std::size_t threads() const { return threads_.size(); }

 private:
  struct Queue {
    std::deque<Job> jobs;
    std::size_t busy = 0;  // threads running this tenant's jobs
  };
  void work();
  // The next job a thread may run, from the first eligible tenant in
  // turn order; false when none may run now. Under mu_.
  bool next_job(Tenant& tenant, Job& job);

  const std::size_t per_tenant_;
  const std::size_t max_queued_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Tenant, Queue> queues_;
  std::deque<Tenant> turn_;  // tenants with queued jobs, next first
  std::size_t queued_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace sandcastle::net
