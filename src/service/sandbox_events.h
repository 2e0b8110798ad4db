// The sandbox event feed: what the console's live list follows. The manager
// publishes an event when a sandbox is created, changes status (paused,
// resumed, stopped) or is removed; each subscriber has a bounded queue of its
// own and is woken when events arrive. Publishing never holds the manager's
// locks and never waits for a subscriber: one that does not drain its queue
// in time loses the queued events, is told to resync (list again), and then
// gets events as before.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace sandcastle::service {

// NOLINTNEXTLINE(bugprone-exception-escape): nlohmann::json's noexcept destructor may allocate
struct SandboxEvent {
  enum class Kind { kCreated, kChanged, kRemoved };
  Kind kind = Kind::kCreated;
  std::string sandbox_id;
  std::string owner;  // "" for the local user
  // The sandbox as list_sandboxes shows it, plus "owner" (created, changed);
  // null for removed.
  nlohmann::json sandbox;
};
const char* sandbox_event_kind_name(SandboxEvent::Kind k);  // "created" | "changed" | "removed"

class SandboxEvents {
 public:
  struct Batch {
    std::vector<SandboxEvent> events;  // oldest first
    // Events were dropped (the queue overflowed) before `events`: the
    // subscriber's picture is stale, list the sandboxes again.
    bool resync = false;
  };

  class Subscription {
   public:
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    // Takes what was queued since the last drain.
    Batch drain();

   private:
    friend class SandboxEvents;
    struct Shared;
    explicit Subscription(std::shared_ptr<Shared> s) : s_(std::move(s)) {}
    std::shared_ptr<Shared> s_;
  };

  explicit SandboxEvents(std::size_t max_queued = 1024) : max_queued_(max_queued) {}
  ~SandboxEvents();
  SandboxEvents(const SandboxEvents&) = delete;
  SandboxEvents& operator=(const SandboxEvents&) = delete;

  // Events of `owner`'s sandboxes (nullopt: every owner's, for an admin).
  // `wake` runs on the publisher's thread, with no lock held, when the queue
  // goes from empty to non-empty or overflows: it must not block (post to
  // an executor, signal a condition variable), and then drain(). Dropping
  // the subscription unsubscribes; after that `wake` is never called.
  std::unique_ptr<Subscription> subscribe(std::optional<std::string> owner,
                                          std::function<void()> wake);
  void publish(const SandboxEvent& e);
  std::size_t subscribers() const;

 private:
  const std::size_t max_queued_;
  mutable std::mutex mu_;
  std::vector<std::weak_ptr<Subscription::Shared>> subs_;
};

}  // namespace sandcastle::service
