// A sandbox's whole SpecOptions as JSON, the form the state database keeps
// so a persistent sandbox is recreated after a restart exactly as it was
// asked for. The JSON is the server's own (written by spec_to_json), but it
// is read back from a file on disk: every field is checked again, and the
// spec is validated by SandboxSpec::create as any other.
#pragma once

#include <string>

#include "common/result.h"
#include "sandbox/spec.h"

namespace sandcastle::service {

std::string spec_to_json(const sandbox::SpecOptions& o);
Result<sandbox::SpecOptions> spec_from_json(const std::string& text);

}  // namespace sandcastle::service
