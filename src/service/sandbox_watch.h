// Turns the manager's change notices into sandbox events: the manager only
// names a sandbox that changed (it may hold its locks then), and this
// watcher's thread looks the sandbox up afterwards, without them, and
// publishes created / changed (status) / removed.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "service/sandbox_events.h"
#include "service/sandbox_manager.h"

namespace sandcastle::service {

class SandboxWatch {
 public:
  // Registers itself as `manager`'s change listener; both outlive it.
  SandboxWatch(SandboxManager& manager, SandboxEvents& events);
  ~SandboxWatch();
  SandboxWatch(const SandboxWatch&) = delete;
  SandboxWatch& operator=(const SandboxWatch&) = delete;

 private:
  void changed(const std::string& id, const std::string& owner,
               std::shared_ptr<const SandboxEntry> created);
  void publish(const std::string& id, const std::string& owner,
               const std::shared_ptr<const SandboxEntry>& created);
  void loop();

  SandboxManager& manager_;
  SandboxEvents& events_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  // (id, owner) -> the new sandbox when the notice was its creation.
  std::map<std::pair<std::string, std::string>, std::shared_ptr<const SandboxEntry>> pending_;
  std::map<std::string, std::string>
      status_;  // what subscribers were last told, by id (watch thread)
  std::thread thread_;
};

}  // namespace sandcastle::service
