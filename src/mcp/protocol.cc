#include "mcp/protocol.h"

#include <algorithm>

namespace sandcastle::mcp {

bool is_legacy_version(std::string_view v) {
  return std::find(kLegacyVersions.begin(), kLegacyVersions.end(), v) != kLegacyVersions.end();
}

bool is_supported_modern_version(std::string_view v) {
  return std::find(kModernVersions.begin(), kModernVersions.end(), v) != kModernVersions.end();
}

std::string negotiate_legacy_version(std::string_view requested) {
  if (is_legacy_version(requested)) return std::string(requested);
  return std::string(kLatestLegacyVersion);
}

int log_level_rank(std::string_view level) {
  static constexpr std::array<std::string_view, 8> kLevels = {
      "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};
  for (size_t i = 0; i < kLevels.size(); ++i)
    if (kLevels[i] == level) return static_cast<int>(i);
  return -1;
}

}  // namespace sandcastle::mcp
