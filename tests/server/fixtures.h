// Tools the official conformance suite and our own e2e tests call. They are
// not in the product: only the test server (tests/server/test_server_main.cc,
// sandcastle-test-server) registers them, when started with --test-fixtures.
#pragma once

#include "mcp/server.h"

namespace sandcastle::mcp {

void register_test_fixtures(Server& server);

// Part of the above: the multi-round-trip (InputRequired) fixtures, and the
// prompt among them (prompts/get test_input_required_result_prompt).
void register_input_required_fixtures(Server& server);
json input_required_prompt(const RequestContext& ctx);

// Part of the above: the tasks fixtures (greet, slow_compute, failing_job, ...).
void register_task_fixtures(Server& server);

}  // namespace sandcastle::mcp
