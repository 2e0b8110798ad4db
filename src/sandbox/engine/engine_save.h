// The Dockerfile save_sandbox builds on an engine (engine_save.cc).
#pragma once

#include <string>
#include <string_view>

#include "common/result.h"

namespace sandcastle::sandbox::engine {

// FROM the sandbox's image ("host": kHostBaseImage), its /workspace tar
// added at kWorkspaceSeedDir, and the labels that say so. An image
// reference that is not one word of printable characters (a newline would
// start a Dockerfile instruction of its own: RUN, ADD of the engine host's
// files, ...) is refused here, whatever checked it before: kInvalidArgument.
Result<std::string> save_dockerfile(std::string_view image);

}  // namespace sandcastle::sandbox::engine
