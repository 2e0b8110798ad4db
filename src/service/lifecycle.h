// A sandbox's lifecycle as a caller drives it, whatever the face (MCP tools,
// REST API, console). Only the caller's own sandboxes: another owner's is
// "not found", exactly as a missing one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/result.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

// create_sandbox's arguments ({language, image, name, persistent,
// ttl_action, env, limits, ttl_s}; defaults from the server's config) and
// the sandbox object every lifecycle result has.
nlohmann::json create_input_schema(const Config& config);
nlohmann::json sandbox_output_schema();
// One sandbox id or name: {sandbox_id} (close_sandbox).
nlohmann::json sandbox_id_schema();

// create_sandbox: a new sandbox of the caller's, as sandbox_json shows it;
// its python/javascript kernel starts warming up in the background.
// Arguments as create_input_schema (checked here).
Result<nlohmann::json> create_sandbox(Env& env, const Caller& c, const nlohmann::json& args);

// list_sandboxes: {sandboxes: [sandbox_json or dormant_json], count}, live
// and dormant, oldest first.
nlohmann::json list_sandboxes(Env& env, const Caller& c);

// close_sandbox: destroys the caller's sandbox (by id or name; live, paused
// or stopped), its files too. {sandbox_id, closed: true}.
Result<nlohmann::json> close_sandbox(Env& env, const Caller& c, const std::string& id_or_name);

}  // namespace sandcastle::service
