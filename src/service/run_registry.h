// The runs in progress in each sandbox, whoever started them (an MCP tool
// call, a REST request): what interrupt (REST POST .../interrupt, the
// console's button) reaches. A run registers a cancel token of its own,
// linked to its request's, so that interrupting it ends the run but not the
// request: the caller still gets the run's result (reason "cancelled", a
// kernel's KeyboardInterrupt).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>

#include "common/cancel_token.h"

namespace sandcastle::service {

class RunRegistry {
 public:
  // Cancels every run registered under `sandbox_id`; how many there were.
  std::size_t interrupt(const std::string& sandbox_id);
  std::size_t running(const std::string& sandbox_id) const;

  // One run: a token that the request's cancellation and interrupt() both
  // cancel, registered for as long as this object lives.
  class Run {
   public:
    Run(RunRegistry& registry, std::string sandbox_id, CancelToken* request);
    ~Run();
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;
    CancelToken* token() { return &token_; }

   private:
    RunRegistry& registry_;
    const std::string sandbox_id_;
    CancelToken* request_;
    CancelToken token_;
    std::size_t request_sub_ = 0;
    std::multimap<std::string, CancelToken*>::iterator it_;
  };

 private:
  mutable std::mutex mu_;
  std::multimap<std::string, CancelToken*> runs_;
};

}  // namespace sandcastle::service
