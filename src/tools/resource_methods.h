// Sandbox files as MCP resources: `sandbox://<sandbox_id>/<path>` (path
// relative to /workspace, percent-encoded). execute_code and execute_command
// link the files they create with these URIs; resources/read serves them to
// the sandbox's owner only; resources/templates/list advertises the template.
#pragma once

#include "service/sandbox_uri.h"

namespace sandcastle::tools {

// The URI codec is the service's (service/sandbox_uri.h).
using service::kSandboxUriTemplate;
using service::parse_sandbox_uri;
using service::sandbox_resource_uri;
using service::SandboxUri;

}  // namespace sandcastle::tools
