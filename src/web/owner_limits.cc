#include "web/owner_limits.h"

namespace sandcastle::web {

std::shared_ptr<void> OwnerLimit::acquire(const std::string& owner) {
  {
    std::lock_guard lock(state_->mu);
    size_t& n = state_->held[owner];
    if (max_ != 0 && n >= max_) {
      if (n == 0) state_->held.erase(owner);
      return nullptr;
    }
    ++n;
  }
  auto st = state_;
  auto* tag = new std::string(owner);
  return std::shared_ptr<void>(tag, [st](void* p) {
    std::unique_ptr<std::string> o(static_cast<std::string*>(p));
    std::lock_guard lock(st->mu);
    auto it = st->held.find(*o);
    if (it != st->held.end() && --it->second == 0) st->held.erase(it);
  });
}

size_t OwnerLimit::held(const std::string& owner) const {
  std::lock_guard lock(state_->mu);
  auto it = state_->held.find(owner);
  return it == state_->held.end() ? 0 : it->second;
}

}  // namespace sandcastle::web
