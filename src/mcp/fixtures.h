// Tools the official conformance suite and our own e2e tests call. They exist
// only when the server runs with --test-fixtures, never in the default list.
#pragma once

#include "mcp/server.h"

namespace sandcastle::mcp {

void register_test_fixtures(Server& server);

}  // namespace sandcastle::mcp
