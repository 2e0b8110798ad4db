// sandcastle: an MCP server that runs code in sandboxes. This file is the
// composition root: it reads the command line and environment, builds the
// backend, the sandbox manager and the tools, and hands them to a transport.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include "common/log.h"
#include "mcp/fixtures.h"
#include "mcp/server.h"
#include "sandbox/native/doctor.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/sweep.h"
#include "sandbox/refusing_backend.h"
#include "tools/languages.h"
#include "tools/tool_env.h"
#include "transport/stdio/stdio_transport.h"

namespace {

using namespace sandcastle;

constexpr const char* kInstructions =
    "sandcastle runs code in isolated Linux sandboxes (no network, unprivileged user, memory/CPU/"
    "process/disk limits). For a quick one-off, call execute_code without a sandbox_id. For "
    "multi-step work, create_sandbox once and pass its sandbox_id to execute_code, "
    "execute_command and the file tools; reuse sandboxes from list_sandboxes; close_sandbox "
    "when done.";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

std::vector<std::string> split_csv(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::unique_ptr<sandbox::Backend> make_backend(const std::string& name, bool allow_weak) {
  if (name != "native")
    return std::make_unique<sandbox::RefusingBackend>(
        "backend '" + name + "' is not available in this build; available backends: native "
        "(set --backend native or INTERPRETER_TYPE=native)");
  auto report = sandbox::native::check_isolation();
  if (!report.adequate && !allow_weak) {
    std::string why;
    for (const auto& p : report.problems) why += (why.empty() ? "" : "; ") + p;
    spdlog::error("isolation is inadequate on this host: {} (see `sandcastle doctor`)", why);
    return std::make_unique<sandbox::RefusingBackend>(
        "this host cannot isolate code safely: " + why +
        ". Run `sandcastle doctor` for details; an operator may start the server with "
        "--allow-weak-isolation to run code anyway");
  }
  for (const auto& w : report.weaknesses) spdlog::warn("isolation weakened: {}", w);
  auto native = sandbox::native::NativeBackend::create();
  if (!native.ok()) {
    spdlog::error("native backend unavailable: {}", native.error().message());
    return std::make_unique<sandbox::RefusingBackend>("the native sandbox backend could not start: " +
                                                      native.error().message() +
                                                      ". Run `sandcastle doctor` for details");
  }
  return std::move(native).value();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sandcastle: an MCP server that runs code safely in isolated sandboxes"};
  app.set_version_flag("--version", std::string("sandcastle ") + SANDCASTLE_VERSION);
  std::string transport = "stdio";
  std::string log_level = "info";
  bool test_fixtures = false;
  bool allow_weak = false;
  size_t max_message_bytes = 64 * 1024 * 1024;
  size_t page_size = 100;
  std::string backend_name = env_or("INTERPRETER_TYPE", "native");
  std::string pass_through;
  std::vector<std::string> host_paths;
  tools::ManagerOptions manager_opts;
  int64_t ttl_s = manager_opts.default_ttl.count();
  tools::ToolConfig tool_cfg;
  tool_cfg.default_image = env_or("CONTAINER_IMAGE", "host");
  tool_cfg.default_language = env_or("CONTAINER_LANGUAGE", "python");

  app.add_option("--transport", transport, "stdio (default) or http")
      ->check(CLI::IsMember({"stdio", "http"}));
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off (stderr)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("--test-fixtures", test_fixtures, "expose the conformance-suite fixture tools (testing only)");
  app.add_option("--max-message-bytes", max_message_bytes, "largest accepted message (stdio line)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 31));
  app.add_option("--page-size", page_size, "items per page of list results")->check(CLI::Range(1, 10000));
  app.add_option("--backend", backend_name, "sandbox backend (env INTERPRETER_TYPE): native");
  app.add_flag("--allow-weak-isolation", allow_weak,
               "run code even when `sandcastle doctor` finds isolation inadequate");
  app.add_option("--pass-through-env", pass_through,
                 "comma-separated host variables copied into every sandbox");
  app.add_option("--allow-host-path", host_paths,
                 "host directory upload_file/download_file may use (repeatable)");
  app.add_option("--max-sandboxes", manager_opts.max_sandboxes, "server-wide cap on live sandboxes")
      ->check(CLI::Range(1, 100000));
  app.add_option("--pool-size", manager_opts.pool_size, "warm sandboxes kept ready")
      ->check(CLI::Range(0, 1000));
  app.add_option("--sandbox-ttl", ttl_s, "seconds an idle sandbox lives (default 1800)")
      ->check(CLI::Range(int64_t{10}, int64_t{7 * 24 * 3600}));
  app.add_option("--default-language", tool_cfg.default_language,
                 "language of execute_code without one (env CONTAINER_LANGUAGE)");
  app.add_option("--pip-index-url", tool_cfg.pip_index_url,
                 "package index pip installs from (the only host the installer may reach)");
  app.add_option("--npm-registry", tool_cfg.npm_registry,
                 "registry npm installs from (the only host the installer may reach)");
  auto* doctor = app.add_subcommand("doctor", "print what this host allows and the isolation sandcastle will use");
  CLI11_PARSE(app, argc, argv);

  if (doctor->parsed()) return sandbox::native::run_doctor(std::cout);

  init_logging(log_level);
  // Before any thread starts (the backend and the pool start some).
  transport::block_termination_signals();
  manager_opts.default_ttl = std::chrono::seconds(ttl_s);
  for (const auto& name : split_csv(pass_through)) {
    if (const char* v = std::getenv(name.c_str())) {
      tool_cfg.pass_through_env[name] = v;
    } else {
      spdlog::warn("--pass-through-env: {} is not set in the server's environment", name);
    }
  }
  tool_cfg.allowed_host_paths = host_paths;
  if (auto lang = tools::find_language(tool_cfg.default_language); !lang.ok()) {
    spdlog::error("default language: {}", lang.error().message());
    return 2;
  } else {
    tool_cfg.default_language = (*lang)->name;
  }

  auto swept = sandbox::native::sweep_leftovers();
  for (const auto& r : swept.removed) spdlog::info("removed leftover of a crashed predecessor: {}", r);
  for (const auto& f : swept.failed) spdlog::warn("could not remove leftover: {}", f);

  auto backend = make_backend(backend_name, allow_weak);
  sandbox::SpecOptions pool_spec;
  pool_spec.image = tool_cfg.default_image;
  pool_spec.limits = tool_cfg.default_limits;
  pool_spec.env = tool_cfg.pass_through_env;
  if (backend->name() == "none") manager_opts.pool_size = 0;
  tools::SandboxManager manager(*backend, manager_opts, pool_spec);
  tools::ToolEnv tool_env{manager, tool_cfg};

  mcp::ServerInfo info;
  info.instructions = kInstructions;
  mcp::ServerOptions options;
  options.page_size = page_size;
  mcp::Server server(info, options);
  tools::register_sandbox_tools(server, tool_env);
  if (test_fixtures) mcp::register_test_fixtures(server);

  if (transport == "http") {
    spdlog::error("the HTTP transport is not available in this build yet; use --transport stdio");
    return 2;
  }
  manager.start();
  transport::StdioOptions stdio;
  stdio.max_line_bytes = max_message_bytes;
  int rc = transport::serve_stdio(server, stdio);
  manager.shutdown();
  spdlog::default_logger()->flush();
  // Handlers that ignored cancellation may still hold threads; end the process
  // without running static destructors underneath them.
  std::fflush(stdout);
  _exit(rc);
}
