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

void Reaper::kill_and_release(std::string id, InitProcess init, std::shared_ptr<SandboxCgroup> cgroup) {
  // Its processes' exit (unmapping memory, unmounting, closing) yields to
  // the sandboxes in use; loop() lifts that if they take too long.
  if (cgroup) (void)cgroup->set_cpu_share(CpuShare::kBackground);
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

// A busy machine could keep a background exit waiting indefinitely, and
// a dying sandbox still holds its memory: after kBackgroundExit it exits
// at the normal share.
void Reaper::exit_in_background(Item& item) {
  if (!item.cgroup || !item.init.pidfd || item.cgroup->cpu_share() != CpuShare::kBackground) return;
  struct pollfd p {
    item.init.pidfd.get(), POLLIN, 0
  };
  const auto deadline = item.killed_at + kBackgroundExit;
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    const int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return;
    if (r < 0 && errno != EINTR) break;
  }
  (void)item.cgroup->set_cpu_share(CpuShare::kNormal);
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
    exit_in_background(item);
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
