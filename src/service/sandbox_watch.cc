#include "service/sandbox_watch.h"

#include "service/sandbox_view.h"

namespace sandcastle::service {

SandboxWatch::SandboxWatch(SandboxManager& manager, SandboxEvents& events)
    : manager_(manager), events_(events) {
  thread_ = std::thread([this] { loop(); });
  manager_.set_change_listener([this](const std::string& id, const std::string& owner,
                                      std::shared_ptr<const SandboxEntry> created) {
    changed(id, owner, std::move(created));
  });
}

SandboxWatch::~SandboxWatch() {
  manager_.set_change_listener(nullptr);
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SandboxWatch::changed(const std::string& id, const std::string& owner,
                           std::shared_ptr<const SandboxEntry> created) {
  {
    std::lock_guard l(mu_);
    auto& slot = pending_[{id, owner}];
    if (created) slot = std::move(created);
  }
  cv_.notify_one();
}

void SandboxWatch::loop() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    auto batch = std::move(pending_);
    pending_.clear();
    l.unlock();
    for (const auto& [key, created] : batch) publish(key.first, key.second, created);
    batch.clear();  // the last hold on a closed sandbox's entry: freed without mu_
    l.lock();
  }
}

void SandboxWatch::publish(const std::string& id, const std::string& owner,
                           const std::shared_ptr<const SandboxEntry>& created) {
  SandboxEvent e;
  e.sandbox_id = id;
  e.owner = owner;
  auto [live, dormant] = manager_.find_any(id, owner);
  if (live)
    e.sandbox = sandbox_json(*live);
  else if (dormant)
    e.sandbox = dormant_json(*dormant, manager_.store());
  auto known = status_.find(id);
  if (e.sandbox.is_null()) {
    if (known == status_.end()) {
      if (!created) return;
      // Came and went before this thread looked: subscribers still see it
      // come (as it was made) and go, as they would have a moment later.
      e.kind = SandboxEvent::Kind::kCreated;
      e.sandbox = sandbox_json(*created);
      e.sandbox["owner"] = owner;
      events_.publish(e);
      e.sandbox = nullptr;
    } else {
      status_.erase(known);
    }
    e.kind = SandboxEvent::Kind::kRemoved;
  } else {
    e.sandbox["owner"] = owner;
    const std::string status = e.sandbox.value("status", "");
    if (known != status_.end() && known->second == status) return;
    e.kind = known == status_.end() ? SandboxEvent::Kind::kCreated : SandboxEvent::Kind::kChanged;
    status_[id] = status;
  }
  events_.publish(e);
}

}  // namespace sandcastle::service
