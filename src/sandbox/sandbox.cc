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

bool valid_listed_name(std::string_view name) {
  constexpr std::size_t kMaxName = 4096, kMaxComponent = 255;
  if (name.empty() || name.size() > kMaxName || name.front() == '/' ||
      name.find('\0') != std::string_view::npos)
    return false;
  std::size_t start = 0;
  while (start <= name.size()) {
    std::size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view comp = name.substr(start, end - start);
    if (comp.empty() || comp == "." || comp == ".." || comp.size() > kMaxComponent) return false;
    start = end + 1;
  }
  return true;
}

}  // namespace sandcastle::sandbox
