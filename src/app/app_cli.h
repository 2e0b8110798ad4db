// The server's command line (flags, subcommands) and the configuration it
// selects: defaults < config.toml < environment < flags.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "config/config.h"
#include "images/image_cli.h"
#include "app/app.h"
#include "store/key_store.h"

namespace sandcastle::app {

// What the command line said. The flags bind to these members: it stays in
// place (CLI::App is not movable).
struct CommandLine {
  CLI::App app{"sandcastle: an MCP server that runs code safely in isolated sandboxes"};
  // Flags that mirror a configuration setting, as text by setting name:
  // applied after config.toml and the environment, so they win.
  std::map<std::string, std::string> flag_values;
  std::map<std::string, CLI::Option*> flag_opts;
  // Flags of other code-sandbox servers (config/start_checks.h).
  std::map<std::string, std::string> foreign_flags;
  std::string config_path;
  bool allow_weak = false;
  bool check_db = false;
  bool insecure = false;
  bool auth = false;
  bool stdio_flag = false;
  std::vector<std::string> host_paths;
  std::string pass_through;
  CLI::App* doctor = nullptr;
  bool doctor_json = false;
  CLI::App* keys = nullptr;
  CLI::App* keys_create = nullptr;
  CLI::App* keys_list = nullptr;
  CLI::App* keys_revoke = nullptr;
  bool keys_json = false;
  bool key_admin = false;  // keys create --admin
  std::string key_name, revoke_id;
  CLI::App* cfg_show = nullptr;
  bool cfg_json = false;
  std::unique_ptr<images::ImageCli> image_cli;
};

void define_command_line(CommandLine& c, const AppHooks& hooks);
// Fills `loader`; 0, or the exit status after saying what is wrong.
int load_config(CommandLine& c, config::Loader& loader);
// `doctor`, `config show`, `image ...`, `keys ...`: their exit status, or
// nullopt when the command line asks for the server.
std::optional<int> run_subcommand(const CommandLine& c, const config::Loader& loader);

bool is_loopback_host(const std::string& host);
// The state directory, made private to its owner.
Status ensure_dir(const std::string& dir);
Result<std::unique_ptr<store::KeyStore>> open_keys(const config::Config& cfg);

}  // namespace sandcastle::app
