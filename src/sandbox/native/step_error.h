// StepError: what the init helper reports when a setup step fails — the step
// ("mount /proc") and the errno — so the server can say exactly what broke.
// Used only in the single-threaded helper, where std::string is safe.
#pragma once

#include <cerrno>
#include <string>

namespace sandcastle::sandbox::native {

struct StepError {
  int err = 0;
  std::string step;
};

inline StepError step_failed(std::string step, int err = errno) { return StepError{err, std::move(step)}; }

}  // namespace sandcastle::sandbox::native
