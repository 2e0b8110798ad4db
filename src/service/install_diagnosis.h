// Why a package install failed, in one line a person (or a model) can act
// on: read from the installer's own output (pip, npm). That output comes from
// the sandbox and is hostile: only a bounded tail of each stream is scanned,
// with plain substring searches (no backtracking regex), and whatever is
// quoted back is cut short and stripped of control characters.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sandcastle::service {

struct InstallDiagnosis {
  // Machine-readable: package_not_found, no_matching_version, build_failed,
  // index_unreachable, tls_verification_failed, tls_error, blocked_by_policy,
  // dependency_conflict, integrity_mismatch, disk_full, installer_failed.
  std::string cause;
  // One line, the cause first ("package not found: ...").
  std::string summary;
};

struct InstallOutcome {
  std::string_view manager;  // "pip" or "npm"
  int exit_status = 0;
  std::string_view stdout_data;
  std::string_view stderr_data;
  std::string_view index;          // the index URL the installer was given
  std::string_view denied_host;    // the last host:port the installer's proxy refused ("" if none)
  bool host_ca_given = false;      // the installer got a CA bundle from the host's settings
  std::string_view
      proxy_failure;  // why the installer's proxy's last connection failed ("" if none)
};

// Bytes of each stream's tail that are scanned.
inline constexpr std::size_t kDiagnosisScanBytes = std::size_t{256} * 1024;

InstallDiagnosis diagnose_install(const InstallOutcome& outcome);

// Printable, single-line, at most `max` bytes (an ellipsis marks a cut).
std::string one_line(std::string_view s, std::size_t max);

// A URL with its user:password part replaced by "***" (an index URL may
// carry a token; messages and logs must not).
std::string redact_url(std::string_view url);

}  // namespace sandcastle::service
