#include "service/admission.h"

#include <algorithm>
#include <cstdio>

namespace sandcastle::service {

namespace {

std::string seconds_text(AdmissionQueue::Clock::duration d) {
  char buf[32];
  (void)std::snprintf(
      buf, sizeof buf, "%.1f",
      static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) /
          1000.0);
  return buf;
}

}  // namespace

AdmissionQueue::AdmissionQueue(size_t max_waiting, std::chrono::milliseconds report_interval)
    : max_waiting_(max_waiting), report_interval_(report_interval) {}

AdmissionQueue::Waiter* AdmissionQueue::head() const {
  for (const auto& line : lines_)
    if (!(line.at_quota && line.quota_gen == gen_)) return line.waiters.front();
  return nullptr;
}

// Round-robin: a waiter at index i of its caller's line goes after the first
// i waiters of every caller, and after the (i+1)-th of the callers ahead of
// its own in the rotation.
size_t AdmissionQueue::position_of(const Waiter* w) const {
  size_t rank = 0;
  size_t index = 0;
  bool found = false;
  for (const auto& line : lines_) {
    auto it = std::find(line.waiters.begin(), line.waiters.end(), w);
    if (it != line.waiters.end()) {
      index = static_cast<size_t>(it - line.waiters.begin());
      found = true;
      break;
    }
    ++rank;
  }
  if (!found) return 0;
  size_t before = 0;
  size_t r = 0;
  for (const auto& line : lines_) {
    before += std::min(line.waiters.size(), index + (r < rank ? 1 : 0));
    ++r;
  }
  return before + 1;  // `before` counted the waiter's own line up to index, itself excluded
}

// A waiter that leaves unserved (timeout, cancel) keeps its caller's place
// in the rotation.
void AdmissionQueue::remove(Waiter* w) {
  for (auto it = lines_.begin(); it != lines_.end(); ++it) {
    auto pos = std::find(it->waiters.begin(), it->waiters.end(), w);
    if (pos == it->waiters.end()) continue;
    it->waiters.erase(pos);
    --waiting_;
    w->in_line = false;
    if (it->waiters.empty()) lines_.erase(it);
    return;
  }
}

void AdmissionQueue::wake_head() {
  if (Waiter* h = head()) h->cv.notify_one();
}

void AdmissionQueue::notify() {
  std::lock_guard lock(mu_);
  ++gen_;
  wake_head();
}

size_t AdmissionQueue::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_;
}

Status AdmissionQueue::admit(const Request& req) {
  const auto start = Clock::now();
  Waiter w;
  w.caller = req.caller;
  // Subscribed before the lock: a token already cancelled runs the callback
  // at once, and the callback takes mu_.
  struct Subscription {
    CancelToken* token;
    size_t id = 0;
    ~Subscription() {
      if (token && id) token->unsubscribe(id);
    }
  } sub{req.cancel};
  if (req.cancel)
    sub.id = req.cancel->on_cancel([this, &w] {
      // Out of the line before cancel() returns: the session handles the
      // client's next message with the place already free.
      std::lock_guard l(mu_);
      w.cancelled = true;
      if (w.in_line) {
        remove(&w);
        wake_head();
      }
      w.cv.notify_one();
    });

  std::unique_lock lock(mu_);
  if (w.cancelled) return Error::make(ErrorCode::kCancelled, "cancelled before a sandbox was free");
  Take first = Take::kServerFull;
  uint64_t first_gen = 0;
  bool tried_first = false;
  if (lines_.empty()) {  // nobody waits: try at once
    first_gen = gen_;
    lock.unlock();
    first = req.try_take();
    if (first == Take::kTaken) return {};
    lock.lock();
    tried_first = true;
  }
  if (waiting_ >= max_waiting_)
    return Error::make(
        ErrorCode::kResourceExhausted,
        req.describe_full(first) +
            (max_waiting_ == 0 ? std::string("; this server does not queue one-shot runs "
                                             "(--max-queued-runs 0)")
                               : "; " + std::to_string(waiting_) +
                                     " one-shot runs already wait for a sandbox, the most that "
                                     "may wait (--max-queued-runs " +
                                     std::to_string(max_waiting_) + ")") +
            "; retry in a moment, or start the server with a larger --max-sandboxes");

  auto line = std::find_if(lines_.begin(), lines_.end(),
                           [&](const Line& l) { return l.caller == req.caller; });
  if (line == lines_.end()) line = lines_.insert(lines_.end(), Line{req.caller, {}});
  line->waiters.push_back(&w);
  ++waiting_;
  w.in_line = true;
  if (tried_first) {
    if (first == Take::kCallerFull) {
      line->at_quota = true;
      line->quota_gen = first_gen;
    } else {
      w.tried = true;
      w.seen_gen = first_gen;
    }
  }
  // The waiter's own line (std::list iterators stay valid while it waits).
  const auto mine = line;

  size_t reported = position_of(&w);
  if (req.on_queued) {
    const size_t n = waiting_;
    lock.unlock();
    req.on_queued(reported, n);
    lock.lock();
  }
  auto next_report = Clock::now() + report_interval_;

  for (;;) {
    if (w.cancelled) {
      if (w.in_line) {  // cancelled before it joined; otherwise the callback took it out
        remove(&w);
        wake_head();
      }
      return Error::make(ErrorCode::kCancelled, "cancelled while waiting in line for a sandbox");
    }
    if (head() == &w && (!w.tried || w.seen_gen != gen_)) {
      const uint64_t g = gen_;
      lock.unlock();
      const Take took = req.try_take();
      lock.lock();
      if (!w.in_line) {  // cancelled while it tried; a slot it got stays its own
        wake_head();
        if (took == Take::kTaken) return {};
        return Error::make(ErrorCode::kCancelled, "cancelled while waiting in line for a sandbox");
      }
      if (took == Take::kTaken) {
        // Served: out of its line, and its caller to the back of the rotation.
        mine->waiters.pop_front();
        --waiting_;
        w.in_line = false;
        mine->at_quota = false;
        if (mine->waiters.empty())
          lines_.erase(mine);
        else
          lines_.splice(lines_.end(), lines_, mine);
        wake_head();
        return {};
      }
      if (took == Take::kCallerFull) {
        // Held back by its own quota: the next caller's turn until a slot frees.
        mine->at_quota = true;
        mine->quota_gen = g;
        wake_head();
      } else {
        w.tried = true;
        w.seen_gen = g;
      }
      continue;  // capacity may have been freed while it tried
    }
    const auto now = Clock::now();
    if (now >= req.deadline) {
      const size_t pos = position_of(&w);
      const size_t n = waiting_;
      const Take why = mine->at_quota ? Take::kCallerFull : Take::kServerFull;
      remove(&w);
      wake_head();
      return Error::make(
          ErrorCode::kResourceExhausted,
          req.describe_full(why) + "; this one-shot run waited " + seconds_text(now - start) +
              " s in line for a sandbox (place " + std::to_string(pos) + " of " +
              std::to_string(n) +
              ") until its timeout passed; close a sandbox you no longer need (close_sandbox), "
              "retry later, pass a larger timeout_s, or start the server with a larger "
              "--max-sandboxes");
    }
    if (now >= next_report) {
      // The oldest waiter asks again now and then, whatever notify() said.
      if (mine->waiters.front() == &w) {
        w.tried = false;
        mine->at_quota = false;
      }
      next_report = now + report_interval_;
      const size_t pos = position_of(&w);
      if (pos != reported && req.on_queued) {
        reported = pos;
        const size_t n = waiting_;
        lock.unlock();
        req.on_queued(pos, n);
        lock.lock();
      }
      continue;
    }
    w.cv.wait_until(lock, std::min(req.deadline, next_report));
  }
}

}  // namespace sandcastle::service
