// Sandbox files named by URI: `sandbox://<sandbox_id>/<path>` (path relative
// to /workspace, percent-encoded). Runs and installs name the files they make
// with these URIs (files_created, an installer's log); the MCP face serves
// them as resources (tools/resource_methods.h), to the sandbox's owner only.
#pragma once

#include <optional>
#include <string>

namespace sandcastle::service {

inline constexpr const char* kSandboxUriTemplate = "sandbox://{sandbox_id}/{path}";

// sandbox://<id>/<path>, each path segment percent-encoded.
std::string sandbox_resource_uri(const std::string& sandbox_id, const std::string& path);

struct SandboxUri {
  std::string sandbox_id;
  std::string path;  // decoded, relative to the workdir (or absolute)
};
// Parses a sandbox:// URI; nullopt when it is not one (or badly encoded).
std::optional<SandboxUri> parse_sandbox_uri(const std::string& uri);

}  // namespace sandcastle::service
