#include "sandbox/native/reaper.h"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "common/log.h"

namespace sandcastle::sandbox::native {

Reaper::Reaper() : thread_([this] { loop(); }) {}

Reaper::~Reaper() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // the loop empties the queue before it returns
  release_spares();
}

void Reaper::release_spares() {
  std::vector<std::shared_ptr<SandboxCgroup>> spares;
  {
    std::lock_guard lock(mu_);
    keep_spares_ = false;
    spares.swap(spare_);
  }
  for (auto& cg : spares)
    if (auto st = cg->remove(); !st) spdlog::warn("spare cgroup: {}", st.error().message());
}

std::shared_ptr<SandboxCgroup> Reaper::take_spare_cgroup() {
  std::lock_guard lock(mu_);
  if (spare_.empty()) return nullptr;
  auto cg = std::move(spare_.back());
  spare_.pop_back();
  return cg;
}

void Reaper::kill_and_release(std::string id, InitProcess init,
                              std::shared_ptr<SandboxCgroup> cgroup, bool background) {
  // Its processes' exit (unmapping memory, unmounting, closing) yields to
  // the sandboxes in use; wait_for_exit lifts that if they take too long.
  if (cgroup && background) (void)cgroup->set_cpu_share(CpuShare::kBackground);
  if (init.pidfd) syscall(SYS_pidfd_send_signal, init.pidfd.get(), SIGKILL, nullptr, 0);
  // The control socket is init's lifeline too: closed, its loop ends.
  init.control.reset();
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Item{std::move(id), std::move(init), std::move(cgroup), nullptr,
                          std::chrono::steady_clock::now()});
  }
  cv_.notify_all();
}

void Reaper::release(std::shared_ptr<void> obj) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(Item{"", InitProcess{}, nullptr, std::move(obj), {}});
  }
  cv_.notify_all();
}

void Reaper::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return queue_.empty() && in_flight_ == 0; });
}

// A busy machine could keep a background exit waiting indefinitely, and a
// dying sandbox still holds its memory: every killed sandbox, this one and
// those queued behind it, gets the normal share once kBackgroundExit has
// passed since its kill (looked at every kLiftCheck while one exits).
void Reaper::wait_for_exit(Item& item) {
  if (!item.init.pidfd) return;
  struct pollfd p {
    item.init.pidfd.get(), POLLIN, 0
  };
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    const auto next = lift_overdue(item, now);
    auto wait = kLiftCheck;
    if (next != std::chrono::steady_clock::time_point::max())
      wait = std::min(wait, std::chrono::ceil<std::chrono::milliseconds>(next - now));
    const int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, wait.count())));
    if (r > 0 || (r < 0 && errno != EINTR)) return;
  }
}

// Lifts the overdue ones; returns the next deadline (max: none). Queued
// items' groups are touched by this thread only (kill_and_release sets the
// share before it queues them).
std::chrono::steady_clock::time_point Reaper::lift_overdue(
    Item& item, std::chrono::steady_clock::time_point now) {
  auto next = std::chrono::steady_clock::time_point::max();
  auto consider = [&](Item& it) {
    if (!it.cgroup || it.cgroup->cpu_share() != CpuShare::kBackground) return;
    const auto due = it.killed_at + kBackgroundExit;
    if (due <= now)
      (void)it.cgroup->set_cpu_share(CpuShare::kNormal);
    else
      next = std::min(next, due);
  };
  consider(item);
  std::lock_guard lock(mu_);
  for (auto& queued : queue_) consider(queued);
  return next;
}

void Reaper::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    lock.unlock();
    item.keep.reset();
    wait_for_exit(item);
    kill_and_reap(item.init);
    // Only this thread adds spares, so the room seen here is still there below.
    bool room = false;
    {
      std::lock_guard spare_lock(mu_);
      room = keep_spares_ && spare_.size() < kMaxSpareCgroups;
    }
    bool keep = room && item.cgroup && item.cgroup.use_count() == 1 && item.cgroup->recycle().ok();
    if (item.cgroup && !keep)
      if (auto st = item.cgroup->remove(); !st) spdlog::warn("sandbox {}: {}", item.id, st.error().message());
    lock.lock();
    // Spares released meanwhile (shutdown): this one goes too.
    if (keep && !keep_spares_) {
      lock.unlock();
      if (auto st = item.cgroup->remove(); !st)
        spdlog::warn("sandbox {}: {}", item.id, st.error().message());
      lock.lock();
      keep = false;
    }
    if (keep) spare_.push_back(std::move(item.cgroup));
    item.cgroup.reset();
    --in_flight_;
    cv_.notify_all();
  }
}

}  // namespace sandcastle::sandbox::native
