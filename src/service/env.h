// What every service operation shares: the sandbox manager, the operator's
// configuration (defaults, pass-through env, host directories allowed for
// upload/download, package indexes), the image store, the run history and
// the runs in progress. The MCP tools see it as tools::ToolEnv.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/byte_budget.h"
#include "net/rules.h"
#include "sandbox/spec.h"
#include "service/run_registry.h"
#include "service/sandbox_manager.h"

namespace sandcastle::images {
class ImageStore;
}

namespace sandcastle::service {

struct Config {
  std::string default_language = "python";
  std::string default_image = "host";
  // Warm sandboxes start Python ahead of the one-shots that run it
  // (service/ahead.h; --start-ahead).
  bool start_ahead = true;
  // Per-language default images (--python-image, --js-image): "python" ->
  // image. A create without an image of its own takes its language's.
  std::map<std::string, std::string> language_images;
  // Copied into every sandbox's environment (--pass-through-env), values
  // resolved from the server's environment at start.
  std::map<std::string, std::string> pass_through_env;
  // Host directories upload_file/download_file may touch (--allow-host-path).
  std::vector<std::string> allowed_host_paths;
  sandbox::Limits default_limits{};
  std::uint64_t max_file_bytes = 32 * sandbox::kMiB;  // read_file/write_file/upload/download
  // save_sandbox: the largest layer (--max-image-bytes), and where its tar
  // waits for the store (the state dir; empty: $TMPDIR or /tmp).
  std::uint64_t max_image_bytes = 8ull << 30;
  std::string save_tmp_dir;
  // Memory for file data above 1 MiB held at once, server-wide, copies
  // included (service/file_transfer.h): one max_file_bytes read over MCP
  // (8 copies) fits.
  std::shared_ptr<ByteBudget> transfer_budget = std::make_shared<ByteBudget>(256 * sandbox::kMiB);
  std::uint64_t max_output_bytes = 1 * sandbox::kMiB;  // per stream, head and tail kept
  size_t max_listed_files = 10'000;
  // Package indexes (--pip-index-url, --npm-registry): the only hosts the
  // installer's proxy lets it reach.
  std::string pip_index_url = "https://pypi.org/simple";
  std::string npm_registry = "https://registry.npmjs.org";
  // Set when a transport can serve sandbox files over HTTP: returns a
  // download URL for (the sandbox's owner, sandbox_id, path relative to the
  // workdir).
  std::function<std::string(const std::string& owner, const std::string& sandbox_id,
                            const std::string& path)>
      file_link;
  // The MCP App view of a run (web/run_result.html): offered as the resource
  // tools::kRunResultViewUri and named by execute_code's _meta.ui.resourceUri.
  // Empty: no view (clients without MCP Apps lose nothing either way).
  std::string run_result_view_html;
  std::vector<std::string> pip_hosts() const;
  std::vector<std::string> npm_hosts() const;
  // [network]: the mode a create without one gets, the modes callers may
  // ask for, and rules every sandbox starts with (`deny` always applies).
  net::Mode network_default_mode = net::Mode::kNone;
  std::vector<net::Mode> network_modes{net::Mode::kNone, net::Mode::kAllowList};
  std::vector<std::string> network_allow;
  std::vector<std::string> network_deny;
  // Prefixes inside the built-in refusals (loopback, private, link-local,
  // the host's own addresses) that callers' allow rules may open; the
  // operator's own `network_allow` needs no such permission.
  std::vector<net::Cidr> network_private_allow;
};

// Where installed packages live inside a sandbox, and the environment every
// command there gets so it finds them.
inline constexpr const char* kPythonPackages = "/workspace/.sandcastle/python";
inline constexpr const char* kNodePackages = "/workspace/.sandcastle/node";
inline const std::map<std::string, std::string>& package_env() {
  static const std::map<std::string, std::string> kEnv = {
      {"PYTHONPATH", kPythonPackages}, {"NODE_PATH", std::string(kNodePackages) + "/node_modules"}};
  return kEnv;
}

struct Env {
  SandboxManager& manager;
  Config config;
  // The image store (images/image_store.h); null: only image "host".
  images::ImageStore* images = nullptr;
  // Where runs are recorded (the manager's store); null: not recorded.
  store::SandboxStore* store = nullptr;
  // The runs in progress, for interrupt (service/run_registry.h).
  std::shared_ptr<RunRegistry> runs = std::make_shared<RunRegistry>();
  // The operations' input schemas that are checked on every call, built on
  // their first use (they depend only on `config`, which a server never
  // changes once started; whoever changes it replaces this): a warm kernel
  // call spent 7 % of its server CPU building one, a pooled create_sandbox 5 %.
  struct InputSchemas {
    std::once_flag runs_once, create_once;
    std::unique_ptr<const nlohmann::json> code, command, create;
  };
  std::shared_ptr<InputSchemas> input_schemas = std::make_shared<InputSchemas>();
};

}  // namespace sandcastle::service
