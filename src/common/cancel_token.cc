#include "common/cancel_token.h"

namespace sandcastle {

void CancelToken::cancel() {
  std::vector<std::pair<size_t, std::function<void()>>> to_run;
  {
    std::lock_guard lock(mu_);
    if (cancelled_.exchange(true, std::memory_order_acq_rel)) return;
    to_run.swap(callbacks_);
    running_ = true;
    runner_ = std::this_thread::get_id();
  }
  for (auto& [id, fn] : to_run) fn();
  {
    std::lock_guard lock(mu_);
    running_ = false;
  }
  done_cv_.notify_all();
  std::lock_guard l(channel_mu_);
  if (channel_) (void)channel_(Signal::kCancel);
}

size_t CancelToken::on_cancel(std::function<void()> fn) {
  std::unique_lock lock(mu_);
  if (cancelled()) {
    lock.unlock();
    fn();
    return 0;
  }
  size_t id = next_id_++;
  callbacks_.emplace_back(id, std::move(fn));
  return id;
}

void CancelToken::unsubscribe(size_t id) {
  std::unique_lock lock(mu_);
  std::erase_if(callbacks_, [id](const auto& p) { return p.first == id; });
  // The callback may be running right now on the cancelling thread; its
  // captures live on the caller's stack, so wait until it has finished.
  // (A callback that unsubscribes itself must not wait for itself.)
  if (running_ && runner_ != std::this_thread::get_id())
    done_cv_.wait(lock, [this] { return !running_; });
}

}  // namespace sandcastle
