// Network namespace setup: a new namespace has only `lo`, and it is down.
#pragma once

#include <optional>

#include "sandbox/native/step_error.h"

namespace sandcastle::sandbox::native {

std::optional<StepError> bring_loopback_up();

}  // namespace sandcastle::sandbox::native
