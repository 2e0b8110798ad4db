// Pause, resume and fork: a sandbox's durable lifecycle (paused in memory
// or to disk, started again, copied), whatever the face. Only the caller's
// own sandboxes: another owner's is "not found".
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

// Arguments and results of pause_sandbox, resume_sandbox, fork_sandbox.
nlohmann::json pause_input_schema();
nlohmann::json pause_output_schema();
nlohmann::json resume_input_schema();
nlohmann::json resume_output_schema();
nlohmann::json fork_input_schema();
nlohmann::json fork_output_schema();

// {sandbox_id, status: "paused", mode, memory_saved, note}.
Result<nlohmann::json> pause_sandbox(Env& env, const Caller& c, const nlohmann::json& args);
// The sandbox as sandbox_json shows it, with state_lost.
Result<nlohmann::json> resume_sandbox(Env& env, const Caller& c, const nlohmann::json& args);
// The new sandbox as sandbox_json shows it, with forked_from.
Result<nlohmann::json> fork_sandbox(Env& env, const Caller& c, const nlohmann::json& args);

}  // namespace sandcastle::service
