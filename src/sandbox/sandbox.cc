#include "sandbox/sandbox.h"

namespace sandcastle::sandbox {

const char* end_reason_name(EndReason r) {
  switch (r) {
    case EndReason::kExited: return "exited";
    case EndReason::kTimeout: return "timeout";
    case EndReason::kOutOfMemory: return "oom";
    case EndReason::kKilled: return "killed";
    case EndReason::kCancelled: return "cancelled";
  }
  return "?";
}

}  // namespace sandcastle::sandbox
