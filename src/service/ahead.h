// Which command warm sandboxes start ahead of the one-shots the server gets
// (sandbox::AheadCommand): Python loaded and waiting for its script
// (src/kernels/python_ahead.py) while one-shots run Python. Every one-shot
// still gets a process of its own, fresh: its own hash seed (PYTHONHASHSEED
// is not set, so each start draws one), its own random state, nothing left
// by another call.
#pragma once

#include <optional>

#include "sandbox/sandbox.h"
#include "service/env.h"
#include "service/languages.h"

namespace sandcastle::service {

// The command to start ahead for one-shots in `lang`, if it has one.
std::optional<sandbox::AheadCommand> ahead_command_for(const Language& lang);

// The warm pool follows the language of the latest one-shot on the pool's
// image (a burst of Bash does not start Pythons it will not use); nothing
// with config.start_ahead off.
void follow_one_shot(const Config& config, sandbox::Backend& backend, const Language& lang);

}  // namespace sandcastle::service
