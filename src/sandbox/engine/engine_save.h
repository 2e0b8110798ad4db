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
// The image gets kLabelOwner=owner_label (every save writes it, so none is
// inherited from the FROM image).
Result<std::string> save_dockerfile(std::string_view image, std::string_view owner_label);

// kLabelOwner's value for a save by `owner` ("" the operator): "operator",
// else the owner's kind ("key:", "session:") and a hash of it.
std::string save_owner_label(const std::string& owner);

}  // namespace sandcastle::sandbox::engine
