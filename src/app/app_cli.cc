// The command line and the configuration (service/app_cli.h), and the
// subcommands that need no server: doctor, config show, image, keys.
#include "app/app_cli.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sandbox/native/doctor.h"

namespace sandcastle::app {

namespace {

int run_keys(const config::Config& cfg, CLI::App* create, CLI::App* list, CLI::App* revoke,
             const std::string& key_name, const std::string& revoke_id, bool as_json,
             bool key_admin) {
  auto ks = open_keys(cfg);
  if (!ks.ok()) {
    std::cerr << "sandcastle keys: " << ks.error().message() << "\n";
    return 1;
  }
  if (create->parsed()) {
    auto k = (*ks)->create(key_name, key_admin);
    if (!k.ok()) {
      std::cerr << "sandcastle keys create: " << k.error().message() << "\n";
      return 1;
    }
    if (as_json) {
      std::cout
          << nlohmann::json{{"id", k->info.id}, {"name", k->info.name}, {"admin", k->info.admin},
                            {"key", k->secret}}
                 .dump()
          << "\n";
    } else {
      std::cout << k->secret << "\n";
      std::cerr << "created API key " << k->info.id << " (" << k->info.name
                << "); it is shown only now. Send it as 'Authorization: Bearer <key>', 'X-API-Key: "
                   "<key>' or "
                   "?api_key=<key>.\n";
    }
    return 0;
  }
  if (list->parsed()) {
    auto keys = (*ks)->list();
    if (!keys.ok()) {
      std::cerr << "sandcastle keys list: " << keys.error().message() << "\n";
      return 1;
    }
    if (as_json) {
      nlohmann::json arr = nlohmann::json::array();
      for (const auto& k : *keys)
        arr.push_back({{"id", k.id},
                       {"name", k.name},
                       {"created_at", k.created_at},
                       {"admin", k.admin},
                       {"revoked_at",
                        k.revoked_at.empty() ? nlohmann::json() : nlohmann::json(k.revoked_at)}});
      std::cout << arr.dump(2) << "\n";
    } else {
      std::cout << "ID            NAME                  CREATED               ADMIN STATUS\n";
      for (const auto& k : *keys) {
        // Padded, never cut: a long name makes its own line longer.
        std::cout << fmt::format("{:<13} {:<21} {:<21} {:<5} {}\n", k.id, k.name, k.created_at,
                                 k.admin ? "yes" : "no", k.revoked_at.empty() ? "active" : "revoked " + k.revoked_at);
      }
    }
    return 0;
  }
  if (revoke->parsed()) {
    auto s = (*ks)->revoke(revoke_id);
    if (!s.ok()) {
      std::cerr << "sandcastle keys revoke: " << s.error().message() << "\n";
      return 1;
    }
    if (as_json) {
      std::cout << nlohmann::json{{"revoked", revoke_id}}.dump() << "\n";
    } else {
      std::cerr << "revoked " << revoke_id << "\n";
    }
    return 0;
  }
  return 2;
}

// `sandcastle doctor --json`: the report's fields; the exit status is the text form's.
int run_doctor_json() {
  auto r = sandbox::native::check_isolation();
  nlohmann::json j{{"adequate", r.adequate},
                   {"user_namespaces", r.user_namespaces},
                   {"seccomp", r.seccomp},
                   {"pidfd", r.pidfd},
                   {"overlayfs", r.overlayfs},
                   {"landlock_abi", r.landlock_abi},
                   {"cgroup_version", r.cgroup_version},
                   {"cgroup_controllers", r.controllers},
                   {"init_helper", r.init_helper},
                   {"problems", r.problems},
                   {"weaknesses", r.weaknesses}};
  std::cout << j.dump(2) << "\n";
  return r.adequate ? 0 : 1;
}

}  // namespace

bool is_loopback_host(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host == "[::1]" ||
         host.rfind("127.", 0) == 0;
}

Status ensure_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Error::make(ErrorCode::kIo, "create state directory " + dir + ": " + ec.message());
  // Private to its owner; never made writable here (a read-only state
  // directory is reported by the state database, not silently fixed).
  struct stat st {};
  if (::stat(dir.c_str(), &st) == 0 && (st.st_mode & 0077) != 0)
    ::chmod(dir.c_str(), st.st_mode & 0700);
  return ok_status();
}

Result<std::unique_ptr<store::KeyStore>> open_keys(const config::Config& cfg) {
  if (auto s = ensure_dir(cfg.state_dir); !s.ok()) return s.error();
  return store::KeyStore::open(cfg.state_dir + "/sandcastle.db");
}

void define_command_line(CommandLine& c, const AppHooks& hooks) {
  // The flags bind to the members of `c`, under their plain names.
  CLI::App& app = c.app;
  auto& flag_values = c.flag_values;
  auto& flag_opts = c.flag_opts;
  auto& foreign_flags = c.foreign_flags;
  auto& config_path = c.config_path;
  auto& allow_weak = c.allow_weak;
  auto& check_db = c.check_db;
  auto& insecure = c.insecure;
  auto& auth = c.auth;
  auto& host_paths = c.host_paths;
  auto& pass_through = c.pass_through;
  auto& stdio_flag = c.stdio_flag;
  auto& doctor = c.doctor;
  auto& keys = c.keys;
  auto& keys_create = c.keys_create;
  auto& keys_list = c.keys_list;
  auto& keys_revoke = c.keys_revoke;
  auto& cfg_show = c.cfg_show;
  auto& image_cli = c.image_cli;
  app.set_version_flag("--version", std::string("sandcastle ") + SANDCASTLE_VERSION);
  // Flags that mirror a configuration setting are collected as text and
  // applied after config.toml and the environment, so they win.
  auto setting_flag = [&](const std::string& flag, const std::string& setting,
                          const std::string& help) {
    flag_opts[setting] = app.add_option(flag, flag_values[setting], help + " [" + setting + "]");
    return flag_opts[setting];
  };

  app.footer(
      "Transports: stdio (the default: an MCP client starts sandcastle and speaks over "
      "stdin/stdout) or HTTP\n"
      "(--transport http: Streamable HTTP at /mcp and HTTP+SSE at /sse, on 127.0.0.1:8181 unless "
      "--host/--port\n"
      "say otherwise). Once listening, the HTTP server prints the client configuration to paste.\n"
      "From the source tree: `make run` builds and starts HTTP; `make run ARGS=\"--port 9000\"` "
      "keeps HTTP on\n"
      "another port; `make run ARGS=--stdio` serves stdio instead.\n"
      "Listings take --json: keys list, keys create, keys revoke, config show, doctor, image list, "
      "image inspect, image import.");
  app.add_option("--config", config_path,
                 "config.toml to read (default: <state dir>/config.toml when present)");
  auto* transport_opt = setting_flag("--transport", "server.transport", "stdio (default) or http")
                            ->check(CLI::IsMember({"stdio", "http"}));
  app.add_flag("--stdio", stdio_flag,
               "serve MCP over stdin/stdout (shorthand for --transport stdio)")
      ->excludes(transport_opt);
  // Flags of other code-sandbox servers (seed c), accepted only to be
  // refused at start with what to do instead (config/start_checks.h).
  for (const char* f : {"--python-image", "--js-image"})
    app.add_option(f, foreign_flags[f])->group("");
  setting_flag("--host", "server.host", "address the HTTP server binds (default 127.0.0.1)");
  setting_flag("--port", "server.port", "HTTP port (default 8181; 0 picks a free one)");
  setting_flag("--profile", "server.profile",
               "tool set: sandcastle (default) or a reference server's drop-in profile");
  setting_flag("--public-url", "server.public_url",
               "base URL of file links (default http://host:port)");
  setting_flag("--http-threads", "server.threads", "HTTP I/O threads");
  setting_flag("--max-body-bytes", "server.max_body_bytes", "largest HTTP request body");
  setting_flag("--request-timeout-ms", "server.request_timeout_ms",
               "time allowed to send one HTTP request");
  setting_flag("--keepalive-ms", "server.keepalive_ms", "interval of SSE keep-alive comments");
  app.add_flag("--auth", auth, "require an API key (see `sandcastle keys`) [auth.enabled]");
  app.add_flag("--insecure", insecure,
               "allow listening on a non-loopback address without API keys [auth.insecure]");
  setting_flag("--allowed-origins", "http.allowed_origins",
               "comma-separated Origins accepted besides loopback");
  setting_flag("--max-requests-per-key", "http.max_requests_per_key",
               "REST requests one API key may have in progress");
  setting_flag("--max-streams-per-key", "http.max_streams_per_key",
               "REST event streams one API key may have open");
  setting_flag("--max-terminals-per-key", "http.max_terminals_per_key",
               "terminals one API key may have open");
  setting_flag("--allowed-hosts", "http.allowed_hosts", "comma-separated Host names accepted");
  setting_flag("--cors-origins", "http.cors_origins",
               "comma-separated Origins given CORS headers ('*' any)");
  setting_flag("--state-dir", "state_dir", "where keys and state live");
  setting_flag("--log-level", "server.log_level", "trace, debug, info, warn, error or off (stderr)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  setting_flag("--max-message-bytes", "server.max_message_bytes",
               "largest accepted message (stdio line)");
  setting_flag("--page-size", "server.page_size", "items per page of list results");
  setting_flag("--backend", "sandbox.backend",
               "sandbox backend (env INTERPRETER_TYPE): native or engine");
  // Repeatable: the values are joined with ',' (multi_engine.h parses them).
  setting_flag("--engine", "sandbox.engine",
               "Docker/Podman Engine API for --backend engine (default $DOCKER_HOST, else "
               "unix:///var/run/docker.sock); repeat it, as name=URL, for several engines")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  setting_flag("--engine-tls-dir", "sandbox.engine_tls_dir",
               "TLS client files (ca.pem, cert.pem, key.pem) for the tcp:// engines, or "
               "name=DIR per engine (repeatable)")
      ->delimiter(',')
      ->multi_option_policy(CLI::MultiOptionPolicy::Join);
  app.add_flag("--allow-weak-isolation", allow_weak,
               "run code even when `sandcastle doctor` finds isolation inadequate");
  app.add_option("--pass-through-env", pass_through,
                 "comma-separated host variables copied into every sandbox");
  app.add_option("--allow-host-path", host_paths,
                 "host directory upload_file/download_file may use (repeatable)");
  setting_flag("--max-sandboxes", "sandbox.max_sandboxes", "server-wide cap on live sandboxes");
  setting_flag("--max-per-key", "sandbox.max_per_key",
               "live sandboxes per API key or session (0: no quota)");
  setting_flag("--pool-size", "sandbox.pool_size",
               "warm sandboxes kept ready when idle (0: none made ahead)");
  setting_flag("--pool-max", "sandbox.pool_max",
               "most warm sandboxes a burst grows the pool to (default 64)");
  setting_flag("--pool-memory-mb", "sandbox.pool_memory_mb",
               "memory the warm pool may hold (default 64)");
  setting_flag("--start-ahead", "sandbox.start_ahead",
               "warm sandboxes start Python ahead of the one-shots that run it: true or false "
               "(default true)");
  setting_flag(
      "--max-queued-runs", "sandbox.max_queued_runs",
      "one-shot execute_code calls that may wait for a sandbox at the cap (0: refuse at once)");
  setting_flag("--sandbox-ttl", "sandbox.ttl_s", "seconds an idle sandbox lives (default 1800)");
  setting_flag("--default-language", "sandbox.default_language",
               "language of execute_code without one");
  setting_flag("--pip-index-url", "packages.pip_index_url", "package index pip installs from");
  setting_flag("--npm-registry", "packages.npm_registry", "registry npm installs from");
  setting_flag("--network-mode", "network.default_mode",
               "network mode of a sandbox that asks for none (none, allowlist, or full "
               "when network.modes offers it)");
  setting_flag("--network-resolver", "network.resolver",
               "DNS server the network proxies ask (HOST:PORT; default: the system's)");
  setting_flag("--max-image-bytes", "images.max_image_bytes", "largest unpacked size of one image");
  setting_flag("--history-max-mb", "history.max_mb",
               "MiB of run history kept (default 256; 0: none recorded)");
  app.add_flag("--check-db", check_db,
               "read the whole state database (PRAGMA quick_check) at start; without it, only "
               "after a run that did not stop cleanly");

  doctor = app.add_subcommand("doctor",
                              "print what this host allows and the isolation sandcastle will use");
  doctor->add_flag("--json", c.doctor_json, "print JSON");
  keys = app.add_subcommand("keys", "manage API keys (stored hashed in <state dir>/sandcastle.db)");
  keys->require_subcommand(1);
  keys->add_flag("--json", c.keys_json, "print JSON");
  keys_create = keys->add_subcommand("create", "create a key and print it (once)");
  keys_create->add_option("--name", c.key_name, "a name to recognise the key by");
  keys_create->add_flag("--admin", c.key_admin, "the key may manage keys (REST /api/v1/keys)");
  keys_list = keys->add_subcommand("list", "list keys (never the keys themselves)");
  keys_revoke = keys->add_subcommand("revoke", "revoke a key by id or name");
  keys_revoke->add_option("id", c.revoke_id, "key id or name")->required();
  // --json before or after the verb: `keys --json list` and `keys list --json`.
  for (auto* sub : {keys_create, keys_list, keys_revoke})
    sub->add_flag("--json", c.keys_json, "print JSON");
  auto* cfg_cmd = app.add_subcommand("config", "configuration");
  cfg_cmd->require_subcommand(1);
  cfg_show = cfg_cmd->add_subcommand(
      "show", "print the effective configuration and where each value came from");
  cfg_show->add_flag("--json", c.cfg_json, "print JSON");
  image_cli = images::register_image_cli(app);
  if (hooks.add_options) hooks.add_options(app);
}

int load_config(CommandLine& c, config::Loader& loader) {
  auto& flag_values = c.flag_values;
  auto& flag_opts = c.flag_opts;
  const auto& config_path = c.config_path;
  const auto& host_paths = c.host_paths;
  const auto& pass_through = c.pass_through;
  const bool stdio_flag = c.stdio_flag, auth = c.auth, insecure = c.insecure;
  {
    // Legacy variable names of the seeds, below the SANDCASTLE_* ones.
    if (const char* v = std::getenv("INTERPRETER_TYPE"); v && *v)
      (void)loader.set("sandbox.backend", v, config::Source::kEnv);
    if (const char* v = std::getenv("CONTAINER_LANGUAGE"); v && *v)
      (void)loader.set("sandbox.default_language", v, config::Source::kEnv);
    auto env = config::sandcastle_env();
    std::string state_dir = config::default_state_dir();
    if (auto it = env.find(config::env_name("state_dir")); it != env.end()) state_dir = it->second;
    if (flag_opts["state_dir"]->count()) state_dir = flag_values["state_dir"];
    std::string file = config_path;
    if (file.empty() && std::filesystem::exists(state_dir + "/config.toml"))
      file = state_dir + "/config.toml";
    if (!config_path.empty() && !std::filesystem::exists(config_path)) {
      std::cerr << "sandcastle: --config " << config_path << ": no such file\n";
      return 2;
    }
    if (!file.empty()) {
      if (auto s = loader.load_file(file); !s.ok()) {
        std::cerr << "sandcastle: " << s.error().context << "\n";
        return 2;
      }
    }
    if (auto s = loader.load_env(env); !s.ok()) {
      std::cerr << "sandcastle: " << s.error().context << "\n";
      return 2;
    }
    for (auto& [setting, opt] : flag_opts)
      if (opt->count())
        if (auto s = loader.set(setting, flag_values[setting]); !s.ok()) {
          std::cerr << "sandcastle: " << s.error().context << "\n";
          return 2;
        }
    if (stdio_flag) (void)loader.set("server.transport", "stdio");
    if (auth) (void)loader.set("auth.enabled", "true");
    if (insecure) (void)loader.set("auth.insecure", "true");
    if (!host_paths.empty()) {
      std::string joined;
      for (auto& p : host_paths) joined += (joined.empty() ? "" : ",") + p;
      (void)loader.set("sandbox.allowed_host_paths", joined);
    }
    if (!pass_through.empty()) (void)loader.set("sandbox.pass_through_env", pass_through);
    if (loader.config().state_dir.empty()) loader.config().state_dir = state_dir;
    if (auto s = loader.validate(); !s.ok()) {
      std::cerr << "sandcastle: " << s.error().context << "\n";
      return 2;
    }
  }
  return 0;
}

std::optional<int> run_subcommand(const CommandLine& c, const config::Loader& loader) {
  if (c.doctor->parsed())
    return c.doctor_json ? run_doctor_json() : sandbox::native::run_doctor(std::cout);
  const config::Config& cfg = loader.config();
  if (c.cfg_show->parsed()) {
    std::cout << (c.cfg_json ? loader.show_json() : loader.show());
    return 0;
  }
  if (c.image_cli->parsed())
    return c.image_cli->run(cfg.state_dir, {static_cast<uint64_t>(cfg.max_image_bytes)}, std::cout,
                            std::cerr);
  if (c.keys->parsed())
    return run_keys(cfg, c.keys_create, c.keys_list, c.keys_revoke, c.key_name, c.revoke_id,
                    c.keys_json, c.key_admin);
  return std::nullopt;
}

}  // namespace sandcastle::app
