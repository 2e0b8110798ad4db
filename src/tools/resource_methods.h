// Sandbox files as MCP resources: `sandbox://<sandbox_id>/<path>` (path
// relative to /workspace, percent-encoded). execute_code and execute_command
// link the files they create with these URIs; resources/read serves them to
// the sandbox's owner only; resources/templates/list advertises the template.
#pragma once

#include <optional>
#include <string>

namespace sandcastle::tools {

inline constexpr const char* kSandboxUriTemplate = "sandbox://{sandbox_id}/{path}";

// sandbox://<id>/<path>, each path segment percent-encoded.
std::string sandbox_resource_uri(const std::string& sandbox_id, const std::string& path);

struct SandboxUri {
  std::string sandbox_id;
  std::string path;  // decoded, relative to the workdir (or absolute)
};
// Parses a sandbox:// URI; nullopt when it is not one (or badly encoded).
std::optional<SandboxUri> parse_sandbox_uri(const std::string& uri);

}  // namespace sandcastle::tools
