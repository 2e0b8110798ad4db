// sandcastle-test-server: the product (app/app.h) plus the conformance
// fixtures (fixtures.h), which the product does not have. The e2e suites that
// call fixture tools start this binary with --test-fixtures.
#include <CLI/CLI.hpp>

#include "mcp/server.h"
#include "server/fixtures.h"
#include "app/app.h"

int main(int argc, char** argv) {
  bool fixtures = false;
  sandcastle::app::AppHooks hooks;
  hooks.add_options = [&fixtures](CLI::App& app) {
    app.add_flag("--test-fixtures", fixtures, "expose the conformance-suite fixtures");
  };
  hooks.add_tools = [&fixtures](sandcastle::mcp::Server& server) {
    if (fixtures) sandcastle::mcp::register_test_fixtures(server);
  };
  return sandcastle::app::run_app(argc, argv, hooks);
}
