#include "service/ended_sandboxes.h"

namespace sandcastle::service {

void EndedSandboxes::remember(const std::string& id, std::string reason) {
  std::lock_guard lock(mu_);
  if (capacity_ == 0) return;
  auto [it, inserted] = reasons_.insert_or_assign(id, std::move(reason));
  (void)it;
  if (!inserted) return;  // keeps its place in the order: forgotten no later than before
  order_.push_back(id);
  while (reasons_.size() > capacity_ && !order_.empty()) {
    reasons_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<std::string> EndedSandboxes::reason(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = reasons_.find(id);
  if (it == reasons_.end()) return std::nullopt;
  return it->second;
}

size_t EndedSandboxes::size() const {
  std::lock_guard lock(mu_);
  return reasons_.size();
}

}  // namespace sandcastle::service
