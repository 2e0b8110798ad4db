#include "service/run_registry.h"

#include <vector>

namespace sandcastle::service {

std::size_t RunRegistry::interrupt(const std::string& sandbox_id) {
  // Cancelled under the lock: a Run's destructor (which takes it) cannot
  // free its token meanwhile. Cancel callbacks only signal (a kernel's
  // interrupt, an exec's channel), never take this lock.
  std::lock_guard l(mu_);
  auto [from, to] = runs_.equal_range(sandbox_id);
  std::size_t n = 0;
  for (auto it = from; it != to; ++it, ++n) it->second->cancel();
  return n;
}

std::size_t RunRegistry::running(const std::string& sandbox_id) const {
  std::lock_guard l(mu_);
  return runs_.count(sandbox_id);
}

RunRegistry::Run::Run(RunRegistry& registry, std::string sandbox_id, CancelToken* request)
    : registry_(registry), sandbox_id_(std::move(sandbox_id)), request_(request) {
  if (request_) request_sub_ = request_->on_cancel([this] { token_.cancel(); });
  std::lock_guard l(registry_.mu_);
  it_ = registry_.runs_.emplace(sandbox_id_, &token_);
}

RunRegistry::Run::~Run() {
  {
    std::lock_guard l(registry_.mu_);
    registry_.runs_.erase(it_);
  }
  if (request_ && request_sub_) request_->unsubscribe(request_sub_);
}

}  // namespace sandcastle::service
