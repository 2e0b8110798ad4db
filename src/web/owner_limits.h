// A bound on how many of one thing (requests in flight, event streams,
// terminals) each owner may hold at once. A slot is a shared_ptr: the count
// goes down when its last copy goes, on whatever thread that is.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace sandcastle::web {

class OwnerLimit {
 public:
  // max 0: no bound.
  explicit OwnerLimit(size_t max) : state_(std::make_shared<State>()), max_(max) {}
  // A slot for `owner`, or null when it holds `max` already.
  std::shared_ptr<void> acquire(const std::string& owner);
  size_t max() const { return max_; }
  // What `owner` holds now (tests, metrics).
  size_t held(const std::string& owner) const;

 private:
  struct State {
    mutable std::mutex mu;
    std::map<std::string, size_t> held;
  };
  std::shared_ptr<State> state_;  // slots keep it: they may outlive this
  size_t max_;
};

}  // namespace sandcastle::web
