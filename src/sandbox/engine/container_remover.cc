#include "sandbox/engine/container_remover.h"

#include <spdlog/spdlog.h>

namespace sandcastle::sandbox::engine {

ContainerRemover::ContainerRemover(std::shared_ptr<EngineClient> client)
    : client_(std::move(client)), thread_([this] { loop(); }) {}

ContainerRemover::~ContainerRemover() {
  shutdown();
}

void ContainerRemover::remove(const std::string& container_id) {
  {
    std::lock_guard l(mu_);
    if (!stopping_) {
      queue_.push_back(container_id);
      cv_.notify_one();
      return;
    }
  }
  (void)remove_now(container_id);
}

std::size_t ContainerRemover::pending() const {
  std::lock_guard l(mu_);
  return queue_.size() + busy_;
}

bool ContainerRemover::remove_now(const std::string& container_id) {
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    auto st = client_->container_remove(container_id, true, true);
    if (st.ok() || engine_http_status(st.error()) == 404) return true;
    if (attempt == kAttempts) {
      // The next server start sweeps it (its label names this server).
      spdlog::warn("engine {}: could not remove container {}: {}", client_->endpoint().str(),
                   container_id, st.error().message());
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500) * attempt);
  }
  return false;
}

void ContainerRemover::loop() {
  std::unique_lock l(mu_);
  for (;;) {
    cv_.wait(l, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::string id = std::move(queue_.front());
    queue_.pop_front();
    ++busy_;
    l.unlock();
    (void)remove_now(id);
    l.lock();
    --busy_;
  }
}

void ContainerRemover::shutdown() {
  {
    std::lock_guard l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sandcastle::sandbox::engine
