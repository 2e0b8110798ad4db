// Protocol versions and the two eras sandcastle serves on one connection.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace sandcastle::mcp {

enum class Era { kLegacy, kModern };

// Legacy (initialize handshake) versions, oldest first.
inline constexpr std::array<std::string_view, 4> kLegacyVersions = {
    "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
inline constexpr std::string_view kLatestLegacyVersion = "2025-11-25";
// Modern (stateless, per-request _meta) versions.
inline constexpr std::array<std::string_view, 1> kModernVersions = {"2026-07-28"};
// Only this version accepts JSON-RPC batches.
inline constexpr std::string_view kBatchVersion = "2025-03-26";

namespace meta_key {
inline constexpr const char* kProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kClientCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kServerInfo = "io.modelcontextprotocol/serverInfo";
inline constexpr const char* kLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr const char* kSubscriptionId = "io.modelcontextprotocol/subscriptionId";
}  // namespace meta_key

// The version the server answers to an initialize offering `requested`:
// the same when supported, else the newest legacy version.
std::string negotiate_legacy_version(std::string_view requested);
bool is_supported_modern_version(std::string_view v);
bool is_legacy_version(std::string_view v);
// Version comparisons are by ISO date string.
inline bool version_at_least(std::string_view v, std::string_view min) { return v >= min; }

// MCP log levels (RFC 5424 order); -1 when unknown.
int log_level_rank(std::string_view level);

}  // namespace sandcastle::mcp
