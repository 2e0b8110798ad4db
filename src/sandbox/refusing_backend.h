// A backend that creates nothing and says why: used when the host cannot
// isolate code well enough (and --allow-weak-isolation was not given), so the
// server still answers MCP and every sandbox tool explains what to enable.
#pragma once

#include <string>

#include "sandbox/sandbox.h"

namespace sandcastle::sandbox {

class RefusingBackend : public Backend {
 public:
  explicit RefusingBackend(std::string reason) : reason_(std::move(reason)) {}
  std::string name() const override { return "none"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec&) override {
    return Error::make(ErrorCode::kUnavailable, reason_);
  }

 private:
  std::string reason_;
  BackendCapabilities caps_{};
};

}  // namespace sandcastle::sandbox
