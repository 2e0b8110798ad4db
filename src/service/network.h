// A sandbox's network policy as callers see and change it (issue 19):
// create_sandbox's `network` argument, the policy and counters in a
// sandbox's status, and set_sandbox_network.
#pragma once

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "sandbox/spec.h"
#include "service/caller.h"
#include "service/env.h"

namespace sandcastle::service {

// create_sandbox's {mode, allow, deny}.
nlohmann::json network_arg_schema(const Config& config);
// Fills o.network/network_allow/network_deny from `in` (null: the config's
// defaults). Refuses a mode the server does not offer and rules with mode
// none; the config's deny list always applies.
Status apply_network_args(const Config& config, const nlohmann::json* in, sandbox::SpecOptions& o);

// {mode, allow, deny}: the live rules.
nlohmann::json network_json(const SandboxEntry& e);
// {stats: {...}, last_refusals: [...], last_failure?}, for get_sandbox_status; null in mode none.
nlohmann::json network_status_json(const SandboxEntry& e);

nlohmann::json set_network_input_schema();
// Replaces the given lists of a live sandbox's rules. Open connections the
// new rules refuse are closed. {sandbox_id, network, closed_connections}.
Result<nlohmann::json> set_sandbox_network(Env& env, const Caller& c, const nlohmann::json& args);

}  // namespace sandcastle::service
