// sandcastle: an MCP server that runs code in sandboxes.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "common/log.h"
#include "mcp/fixtures.h"
#include "mcp/server.h"
#include "transport/stdio/stdio_transport.h"

namespace {

constexpr const char* kInstructions =
    "sandcastle runs code in isolated Linux sandboxes. Create a sandbox, run code or shell "
    "commands in it, move files in and out, and close it when done.";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sandcastle: an MCP server that runs code safely in isolated sandboxes"};
  app.set_version_flag("--version", std::string("sandcastle ") + SANDCASTLE_VERSION);
  std::string transport = "stdio";
  std::string log_level = "info";
  bool test_fixtures = false;
  size_t max_message_bytes = 16 * 1024 * 1024;
  size_t page_size = 100;
  app.add_option("--transport", transport, "stdio (default) or http")
      ->check(CLI::IsMember({"stdio", "http"}));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (stderr)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("--test-fixtures", test_fixtures,
               "expose the conformance-suite fixture tools (testing only)");
  app.add_option("--max-message-bytes", max_message_bytes, "largest accepted message (stdio line)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 31));
  app.add_option("--page-size", page_size, "items per page of list results")
      ->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);

  sandcastle::init_logging(log_level);

  sandcastle::mcp::ServerInfo info;
  info.instructions = kInstructions;
  sandcastle::mcp::ServerOptions options;
  options.page_size = page_size;
  sandcastle::mcp::Server server(info, options);
  if (test_fixtures) sandcastle::mcp::register_test_fixtures(server);

  if (transport == "http") {
    spdlog::error("the HTTP transport is not available in this build yet; use --transport stdio");
    return 2;
  }
  sandcastle::transport::StdioOptions stdio;
  stdio.max_line_bytes = max_message_bytes;
  int rc = sandcastle::transport::serve_stdio(server, stdio);
  spdlog::default_logger()->flush();
  // Handlers that ignored cancellation may still hold threads; end the process
  // without running static destructors underneath them.
  std::fflush(stdout);
  _exit(rc);
}
