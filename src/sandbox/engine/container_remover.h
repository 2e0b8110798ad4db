// Removes containers off the request path: close_sandbox returns once the
// sandbox's processes are gone (its agent's stream closed, which kills every
// command), and the engine's own removal (60-120 ms here, most of it the
// engine's kill and unmount) happens on this thread. A removal that fails is
// tried again; shutdown() finishes every pending one before it returns.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "sandbox/engine/engine_client.h"

namespace sandcastle::sandbox::engine {

class ContainerRemover {
 public:
  static constexpr int kAttempts = 3;

  explicit ContainerRemover(std::shared_ptr<EngineClient> client);
  ~ContainerRemover();
  ContainerRemover(const ContainerRemover&) = delete;
  ContainerRemover& operator=(const ContainerRemover&) = delete;

  // Queues the container (with its anonymous volumes); after shutdown(),
  // removes it at once.
  void remove(const std::string& container_id);
  // Removals queued or under way.
  std::size_t pending() const;
  // Removes what is queued, then stops the thread. Idempotent.
  void shutdown();

 private:
  void loop();
  // One container, with retries; false if it is still there.
  bool remove_now(const std::string& container_id);

  std::shared_ptr<EngineClient> client_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::string> queue_;
  std::size_t busy_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sandcastle::sandbox::engine
