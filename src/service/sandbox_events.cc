#include "service/sandbox_events.h"

#include <algorithm>
#include <deque>

namespace sandcastle::service {

const char* sandbox_event_kind_name(SandboxEvent::Kind k) {
  switch (k) {
    case SandboxEvent::Kind::kCreated: return "created";
    case SandboxEvent::Kind::kChanged: return "changed";
    case SandboxEvent::Kind::kRemoved: return "removed";
  }
  return "changed";
}

struct SandboxEvents::Subscription::Shared {
  std::optional<std::string> owner;
  std::mutex mu;  // queue, overflowed
  std::deque<SandboxEvent> queue;
  bool overflowed = false;
  // Held while `wake` runs, so that the destructor, once it has cleared
  // `wake` under it, knows no call is running or will.
  std::mutex wake_mu;
  std::function<void()> wake;
};

SandboxEvents::Subscription::~Subscription() {
  std::lock_guard l(s_->wake_mu);
  s_->wake = nullptr;
}

SandboxEvents::Batch SandboxEvents::Subscription::drain() {
  Batch b;
  std::lock_guard l(s_->mu);
  b.events.assign(std::make_move_iterator(s_->queue.begin()),
                  std::make_move_iterator(s_->queue.end()));
  s_->queue.clear();
  b.resync = s_->overflowed;
  s_->overflowed = false;
  return b;
}

SandboxEvents::~SandboxEvents() = default;

std::unique_ptr<SandboxEvents::Subscription> SandboxEvents::subscribe(
    std::optional<std::string> owner, std::function<void()> wake) {
  auto s = std::make_shared<Subscription::Shared>();
  s->owner = std::move(owner);
  s->wake = std::move(wake);
  std::lock_guard l(mu_);
  // Expired subscriptions are pruned here rather than on every publish.
  subs_.erase(std::remove_if(subs_.begin(), subs_.end(), [](const auto& w) { return w.expired(); }),
              subs_.end());
  subs_.push_back(s);
  return std::unique_ptr<Subscription>(new Subscription(std::move(s)));
}

void SandboxEvents::publish(const SandboxEvent& e) {
  std::vector<std::shared_ptr<Subscription::Shared>> targets;
  {
    std::lock_guard l(mu_);
    for (const auto& w : subs_)
      if (auto s = w.lock(); s && (!s->owner || *s->owner == e.owner)) targets.push_back(s);
  }
  for (const auto& s : targets) {
    bool wake = false;
    {
      std::lock_guard l(s->mu);
      if (s->overflowed) continue;  // dropped until it drains and resyncs
      if (s->queue.size() >= max_queued_) {
        s->queue.clear();
        s->overflowed = true;
        wake = true;
      } else {
        wake = s->queue.empty();
        s->queue.push_back(e);
      }
    }
    if (!wake) continue;
    std::lock_guard l(s->wake_mu);
    if (s->wake) s->wake();
  }
}

std::size_t SandboxEvents::subscribers() const {
  std::lock_guard l(mu_);
  return static_cast<std::size_t>(
      std::count_if(subs_.begin(), subs_.end(), [](const auto& w) { return !w.expired(); }));
}

}  // namespace sandcastle::service
