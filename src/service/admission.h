// The waiting line for one-shot runs when the server is at its sandbox cap.
// A one-shot execute_code is not a request for a long-lived sandbox, so past
// the cap it waits for a slot instead of failing: the line is bounded (a
// full line refuses at once), fair between callers (round-robin between
// owners, first come first served within one, so one caller's burst cannot
// starve another), and each waiter leaves when its deadline passes or its
// request is cancelled. Explicit create_sandbox never waits here.
//
// The line does not count slots itself: the one at its head asks `try_take`
// (the manager's cap check and reservation, cheap) and, refused, sleeps until
// notify() says capacity was freed. Only the head asks, so the order holds.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <string>

#include "common/cancel_token.h"
#include "common/result.h"

namespace sandcastle::service {

class AdmissionQueue {
 public:
  using Clock = std::chrono::steady_clock;
  // What a try for a slot gave: one, none because the server is full (all
  // wait), or none because this caller is at its own quota (the next
  // caller's oldest waiter may try instead).
  enum class Take { kTaken, kServerFull, kCallerFull };
  // Called on the waiting thread with the waiter's place (1 = next) and the
  // number waiting, when it joins the line and, at most every
  // `report_interval`, when its place changed.
  using OnQueued = std::function<void(size_t position, size_t waiting)>;

  struct Request {
    std::string caller;  // the owner: API key, session, "" for stdio
    Clock::time_point deadline;
    std::function<Take()> try_take;
    CancelToken* cancel = nullptr;
    OnQueued on_queued;
    // The limit in error messages: "the server already runs its maximum of
    // 64 sandboxes", "you already have 16 live sandboxes, the quota per user".
    std::function<std::string(Take)> describe_full;
  };

  // max_waiting 0: no line, a refused call fails at once.
  explicit AdmissionQueue(size_t max_waiting, std::chrono::milliseconds report_interval =
                                                  std::chrono::milliseconds(250));
  AdmissionQueue(const AdmissionQueue&) = delete;
  AdmissionQueue& operator=(const AdmissionQueue&) = delete;

  // Returns once try_take gave kTaken for this caller (the slot is then the
  // caller's), or fails with kResourceExhausted (the line is full, or the
  // deadline passed while waiting: the message says how long it waited and
  // what to do) or kCancelled.
  Status admit(const Request& req);

  // Capacity may have been freed: the head of the line asks again. Call it
  // without holding locks that try_take takes.
  void notify();

  size_t waiting() const;
  size_t max_waiting() const { return max_waiting_; }

 private:
  struct Waiter {
    std::string caller;
    std::condition_variable cv;
    uint64_t seen_gen = 0;  // notify generation at its last refused try
    bool tried = false;     // has had a refused try since it last saw seen_gen
    bool cancelled = false;
    bool in_line = false;
  };
  struct Line {  // one caller's waiters, oldest first
    std::string caller;
    std::deque<Waiter*> waiters;
    bool at_quota = false;  // its oldest waiter got kCallerFull in generation quota_gen
    uint64_t quota_gen = 0;
  };

  // The waiter whose turn it is: the oldest of the first caller in the
  // rotation not held back by its own quota.
  Waiter* head() const;
  size_t position_of(const Waiter* w) const;
  void remove(Waiter* w);
  void wake_head();

  const size_t max_waiting_;
  const std::chrono::milliseconds report_interval_;
  mutable std::mutex mu_;
  std::list<Line> lines_;  // round-robin order: the front line's oldest waiter is next
  size_t waiting_ = 0;
  uint64_t gen_ = 0;  // bumped by notify()
};

}  // namespace sandcastle::service
