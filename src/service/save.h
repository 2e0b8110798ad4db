// save_sandbox (issue 15): a sandbox's changes as a new image in the store,
// its base image's layers plus one layer made inside the sandbox
// (sandbox/native/layer_export.h), or on a container engine its own image.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

// save_sandbox's arguments {sandbox_id, name, base?} and result.
nlohmann::json save_input_schema();
nlohmann::json save_output_schema();
// {image: {...}, sandbox_id, saved, layer_bytes, consistent, warnings, ...}.
Result<nlohmann::json> save_sandbox(Env& env, const Caller& c, const nlohmann::json& args);

}  // namespace sandcastle::service
