// Tools the official conformance suite and our own e2e tests call. They exist
// only when the server runs with --test-fixtures, never in the default list.
#pragma once

#include "mcp/server.h"

namespace sandcastle::mcp {

void register_test_fixtures(Server& server);

// Part of the above: the multi-round-trip (InputRequired) fixtures, and the
// prompt among them (prompts/get test_input_required_result_prompt).
void register_input_required_fixtures(Server& server);
json input_required_prompt(const RequestContext& ctx);

}  // namespace sandcastle::mcp
