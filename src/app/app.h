// The server program: the command line, the configuration and the parts it
// is made of (state, backend, manager, tools, transport). src/main.cc runs it
// as the product; the test server (tests/server/) runs it with the
// conformance fixtures added through the hooks.
#pragma once

#include <functional>

namespace CLI {
class App;
}
namespace sandcastle::mcp {
class Server;
}

namespace sandcastle::app {

struct AppHooks {
  // More command-line options, before parsing.
  std::function<void(CLI::App&)> add_options;
  // More tools and methods, after the sandbox tools are registered.
  std::function<void(mcp::Server&)> add_tools;
};

// Runs `sandcastle` with these arguments; returns the exit status (the
// serving paths end the process themselves).
int run_app(int argc, char** argv, const AppHooks& hooks = {});

}  // namespace sandcastle::app
