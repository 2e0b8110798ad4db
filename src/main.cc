// sandcastle: an MCP server that runs code in sandboxes. This file is the
// composition root: it reads the configuration (config.toml < environment <
// flags), builds the backend, the sandbox manager and the tools, and hands
// them to a transport (stdio, or HTTP with API keys and file links).
#include <fmt/format.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "common/log.h"
#include "common/metrics.h"
#include "common/proc_identity.h"
#include "config/config.h"
#include "config/start_checks.h"
#include "images/image_cli.h"
#include "images/image_store.h"
#include "mcp/fixtures.h"
#include "service/sandboxes.h"
#include "mcp/server.h"
#include "sandbox/native/doctor.h"
#include "sandbox/native/native_backend.h"
#include "service/backends.h"
#include "sandbox/native/sweep.h"
#include "sandbox/refusing_backend.h"
#include "store/key_store.h"
#include "web/rest_api.h"
#include "store/sqlite_sandbox_store.h"
#include "store/state_lock.h"
#include "tools/file_transfer.h"
#include "tools/languages.h"
#include "tools/tool_env.h"
#include "transport/http/client_config.h"
#include "transport/http/file_links.h"
#include "transport/http/http_server.h"
#include "transport/http/mcp_http.h"
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

int run_keys(const config::Config& cfg, CLI::App* create, CLI::App* list, CLI::App* revoke,
             const std::string& key_name, const std::string& revoke_id, bool as_json,
             bool key_admin = false) {
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
                                 k.admin ? "yes" : "no",
                                 k.revoked_at.empty() ? "active" : "revoked " + k.revoked_at);
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

// The running binary, for the stdio client configuration.
std::string self_path() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("sandcastle") : p.string();
}

void wait_for_termination() {
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  int sig = 0;
  while (sigwait(&mask, &sig) != 0) {
  }
  spdlog::info("shutting down: {}", sig == SIGTERM ? "SIGTERM" : "SIGINT");
}

}  // namespace

static int run(int argc, char** argv);

// The outermost boundary: an exception that gets this far (a filesystem error
// while reading the configuration, std::bad_alloc) ends the process with its
// message and status 1 rather than std::terminate's abort.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "sandcastle: %s\n", e.what());
  } catch (...) {
    (void)std::fprintf(stderr, "sandcastle: unknown exception\n");
  }
  return 1;
}

static int run(int argc, char** argv) {
  // Buffers of 1 MiB and more (file data, large replies) are mmapped and
  // given back on free. glibc otherwise raises its mmap threshold to the
  // largest size freed so far and keeps later ones in its arenas: the
  // memory a burst of large transfers once needed would stay the server's.
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);  // NOLINT(concurrency-mt-unsafe): no other thread yet
  CLI::App app{"sandcastle: an MCP server that runs code safely in isolated sandboxes"};
  app.set_version_flag("--version", std::string("sandcastle ") + SANDCASTLE_VERSION);
  // Flags that mirror a configuration setting are collected as text and
  // applied after config.toml and the environment, so they win.
  std::map<std::string, std::string> flag_values;
  std::map<std::string, CLI::Option*> flag_opts;
  auto setting_flag = [&](const std::string& flag, const std::string& setting,
                          const std::string& help) {
    flag_opts[setting] = app.add_option(flag, flag_values[setting], help + " [" + setting + "]");
    return flag_opts[setting];
  };
  std::string config_path;
  bool test_fixtures = false;
  bool allow_weak = false;
  bool check_db = false;
  bool insecure = false;
  bool auth = false;
  std::vector<std::string> host_paths;
  std::string pass_through;

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
  bool stdio_flag = false;
  app.add_flag("--stdio", stdio_flag,
               "serve MCP over stdin/stdout (shorthand for --transport stdio)")
      ->excludes(transport_opt);
  // Flags of other code-sandbox servers (seed c), accepted only to be
  // refused at start with what to do instead (config/start_checks.h).
  std::map<std::string, std::string> foreign_flags;
  for (const char* f : {"--python-image", "--js-image"})
    app.add_option(f, foreign_flags[f])->group("");
  setting_flag("--host", "server.host", "address the HTTP server binds (default 127.0.0.1)");
  setting_flag("--port", "server.port", "HTTP port (default 8181; 0 picks a free one)");
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
  setting_flag("--allowed-hosts", "http.allowed_hosts", "comma-separated Host names accepted");
  setting_flag("--cors-origins", "http.cors_origins",
               "comma-separated Origins given CORS headers ('*' any)");
  setting_flag("--state-dir", "state_dir", "where keys and state live");
  setting_flag("--log-level", "server.log_level", "trace, debug, info, warn, error or off (stderr)")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("--test-fixtures", test_fixtures,
               "expose the conformance-suite fixtures (testing only)");
  setting_flag("--max-message-bytes", "server.max_message_bytes",
               "largest accepted message (stdio line)");
  setting_flag("--page-size", "server.page_size", "items per page of list results");
  setting_flag("--backend", "sandbox.backend", "sandbox backend (env INTERPRETER_TYPE): native or engine");
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
  setting_flag(
      "--max-queued-runs", "sandbox.max_queued_runs",
      "one-shot execute_code calls that may wait for a sandbox at the cap (0: refuse at once)");
  setting_flag("--sandbox-ttl", "sandbox.ttl_s", "seconds an idle sandbox lives (default 1800)");
  setting_flag("--default-language", "sandbox.default_language",
               "language of execute_code without one");
  setting_flag("--pip-index-url", "packages.pip_index_url", "package index pip installs from");
  setting_flag("--npm-registry", "packages.npm_registry", "registry npm installs from");
  setting_flag("--max-image-bytes", "images.max_image_bytes", "largest unpacked size of one image");
  setting_flag("--history-max-mb", "history.max_mb",
               "MiB of run history kept (default 256; 0: none recorded)");
  app.add_flag("--check-db", check_db,
               "read the whole state database (PRAGMA quick_check) at start; without it, only "
               "after a run that did not stop cleanly");

  auto* doctor = app.add_subcommand(
      "doctor", "print what this host allows and the isolation sandcastle will use");
  bool doctor_json = false;
  doctor->add_flag("--json", doctor_json, "print JSON");
  auto* keys =
      app.add_subcommand("keys", "manage API keys (stored hashed in <state dir>/sandcastle.db)");
  keys->require_subcommand(1);
  bool keys_json = false;
  keys->add_flag("--json", keys_json, "print JSON");
  std::string key_name, revoke_id;
  auto* keys_create = keys->add_subcommand("create", "create a key and print it (once)");
  keys_create->add_option("--name", key_name, "a name to recognise the key by");
  bool key_admin = false;
  keys_create->add_flag("--admin", key_admin, "the key may manage keys (REST /api/v1/keys)");
  auto* keys_list = keys->add_subcommand("list", "list keys (never the keys themselves)");
  auto* keys_revoke = keys->add_subcommand("revoke", "revoke a key by id or name");
  keys_revoke->add_option("id", revoke_id, "key id or name")->required();
  // --json before or after the verb: `keys --json list` and `keys list --json`.
  for (auto* sub : {keys_create, keys_list, keys_revoke})
    sub->add_flag("--json", keys_json, "print JSON");
  auto* cfg_cmd = app.add_subcommand("config", "configuration");
  cfg_cmd->require_subcommand(1);
  auto* cfg_show = cfg_cmd->add_subcommand(
      "show", "print the effective configuration and where each value came from");
  bool cfg_json = false;
  cfg_show->add_flag("--json", cfg_json, "print JSON");
  auto image_cli = images::register_image_cli(app);
  CLI11_PARSE(app, argc, argv);

  if (doctor->parsed())
    return doctor_json ? run_doctor_json() : sandbox::native::run_doctor(std::cout);

  // --- configuration: defaults < config.toml < environment < flags ---------
  config::Loader loader;
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
  const config::Config& cfg = loader.config();
  if (cfg_show->parsed()) {
    std::cout << (cfg_json ? loader.show_json() : loader.show());
    return 0;
  }
  if (image_cli->parsed())
    return image_cli->run(cfg.state_dir, {static_cast<uint64_t>(cfg.max_image_bytes)}, std::cout,
                          std::cerr);
  if (keys->parsed())
    return run_keys(cfg, keys_create, keys_list, keys_revoke, key_name, revoke_id, keys_json, key_admin);

  // The state database (sandbox records, packages, run history) before
  // anything else: a corrupt, read-only or full one stops the start with
  // what to do, naming the path.
  std::unique_ptr<store::SqliteSandboxStore> sandbox_store;
  std::shared_ptr<store::StateDb> state_db;  // marked cleanly stopped before _exit
  // Before any thread starts (the run history's writer, the backend and
  // the pool start some): SIGTERM and SIGINT then reach only sigwait.
  transport::block_termination_signals();
  {
    if (auto d = ensure_dir(cfg.state_dir); !d.ok()) {
      std::cerr << "sandcastle: " << d.error().message() << "\n";
      return 2;
    }
    auto db = store::StateDb::open(
        cfg.state_dir, store::sandbox_migrations(),
        check_db ? store::IntegrityCheck::kAlways : store::IntegrityCheck::kAfterUncleanStop);
    if (!db.ok()) {
      std::cerr << "sandcastle: " << db.error().message() << "\n";
      return 2;
    }
    store::HistoryLimits history;
    history.max_bytes = static_cast<std::uint64_t>(cfg.history_max_mb) << 20;
    state_db = std::move(db).value();
    auto st = store::SqliteSandboxStore::open(state_db, history);
    if (!st.ok()) {
      std::cerr << "sandcastle: " << st.error().message() << "\n";
      return 2;
    }
    sandbox_store = std::move(st).value();
  }

  // The image store (issue 15): images a sandbox may start from. Without
  // it, image "host" only.
  std::unique_ptr<images::ImageStore> image_store;
  std::string image_store_error;
  if (auto st = images::ImageStore::open(
          cfg.state_dir, images::StoreLimits{static_cast<std::uint64_t>(cfg.max_image_bytes)});
      st.ok()) {
    image_store = std::move(*st);
  } else {
    image_store_error = st.error().message();
  }

  // Settings sandcastle cannot honour refuse the start, not the first call.
  {
    config::StartInputs in;
    in.default_language = tools::canonical_language(cfg.default_language);
    in.no_store_reason = image_store_error;
    if (image_store)
      in.image_languages =
          [&image_store](const std::string& ref) -> Result<std::vector<std::string>> {
        auto rec = image_store->find(ref);
        if (!rec.ok()) return rec.take_error();
        return rec->languages;
      };
    const auto src = loader.source_of("sandbox.backend");
    if (src == config::Source::kFlag) {
      in.backend_origin = "--backend";
    } else if (src == config::Source::kFile) {
      in.backend_origin = "the config file";
    } else if (src == config::Source::kEnv) {
      const char* sc = std::getenv("SANDCASTLE_SANDBOX_BACKEND");
      in.backend_origin = sc && *sc ? "SANDCASTLE_SANDBOX_BACKEND" : "INTERPRETER_TYPE";
    }
    for (const char* name : {"CONTAINER_IMAGE", "E2B_API_KEY"})
      if (const char* v = std::getenv(name); v && *v) in.env[name] = v;
    for (const auto& [flag, value] : foreign_flags)
      if (app.count(flag)) in.foreign_flags[flag] = value;
    auto check = config::check_start_settings(cfg, in);
    for (const auto& e : check.errors) std::cerr << "sandcastle: " << e << "\n";
    if (!check.errors.empty()) return 2;
    for (const auto& w : check.warnings) std::cerr << "sandcastle: warning: " << w << "\n";
  }

  init_logging(cfg.log_level);
  if (!image_store)
    spdlog::info("image store unavailable ({}): sandboxes use image \"host\" only",
                 image_store_error);

  const bool http_mode = cfg.transport == "http";
  std::unique_ptr<store::KeyStore> key_store;
  if (http_mode) {
    if (!cfg.auth_enabled && !is_loopback_host(cfg.host) && !cfg.insecure) {
      spdlog::error(
          "refusing to listen on {} without API keys: anyone who can reach it could run code. "
          "Enable auth (--auth, [auth] enabled = true, after `sandcastle keys create`) or pass "
          "--insecure",
          cfg.host);
      return 2;
    }
    auto ks = open_keys(cfg);
    if (!ks.ok()) {
      if (cfg.auth_enabled) {
        spdlog::error("API keys: {}", ks.error().message());
        return 2;
      }
      spdlog::warn("API keys unavailable ({}); serving without them", ks.error().message());
    } else {
      key_store = std::move(ks).value();
      if (cfg.auth_enabled && key_store->active_count() == 0)
        spdlog::warn(
            "auth is on but no API key exists yet: create one with `sandcastle keys create`");
    }
  }

  tools::ManagerOptions manager_opts;
  manager_opts.max_sandboxes = static_cast<size_t>(cfg.max_sandboxes);
  manager_opts.max_queued_runs = static_cast<size_t>(cfg.max_queued_runs);
  manager_opts.default_ttl = std::chrono::seconds(cfg.sandbox_ttl_s);
  // Quotas apply to HTTP owners (keys, sessions); the local stdio user has none.
  if (http_mode) manager_opts.max_per_owner = static_cast<size_t>(cfg.max_per_key);
  // One server per state dir runs its persistent sandboxes (issue 16);
  // others share the rest of the state and refuse persistent: true.
  manager_opts.server_identity = self_identity();
  std::optional<store::StateLock> state_lock;
  if (auto l = store::StateLock::try_acquire(cfg.state_dir); l.ok()) {
    state_lock = std::move(*l);
  } else {
    manager_opts.persistent_refusal = l.error().message();
    spdlog::info("persistent sandboxes are off in this server: {}", l.error().message());
  }
  tools::ToolConfig tool_cfg;
  tool_cfg.default_image = env_or("CONTAINER_IMAGE", "host");
  // Checked at start (config/start_checks.h): the images exist and have these.
  for (const auto& [flag, language] :
       {std::pair{"--python-image", "python"}, {"--js-image", "javascript"}})
    if (app.count(flag) && !foreign_flags[flag].empty())
      tool_cfg.language_images[language] = foreign_flags[flag];
  tool_cfg.default_language = cfg.default_language;
  tool_cfg.pip_index_url = cfg.pip_index_url;
  tool_cfg.npm_registry = cfg.npm_registry;
  tool_cfg.allowed_host_paths = cfg.allowed_host_paths;
  tool_cfg.max_image_bytes = static_cast<uint64_t>(cfg.max_image_bytes);
  tool_cfg.save_tmp_dir = cfg.state_dir;
  tool_cfg.default_limits.memory_bytes = static_cast<uint64_t>(cfg.memory_mb) * sandbox::kMiB;
  tool_cfg.default_limits.cpu_millis = static_cast<uint32_t>(cfg.cpu_millis);
  tool_cfg.default_limits.pids = static_cast<uint32_t>(cfg.pids);
  tool_cfg.default_limits.disk_bytes = static_cast<uint64_t>(cfg.disk_mb) * sandbox::kMiB;
  tool_cfg.default_limits.tmp_bytes = static_cast<uint64_t>(cfg.tmp_mb) * sandbox::kMiB;
  tool_cfg.default_limits.exec_timeout = std::chrono::milliseconds(cfg.exec_timeout_ms);
  for (const auto& name : cfg.pass_through_env) {
    if (const char* v = std::getenv(name.c_str())) {
      tool_cfg.pass_through_env[name] = v;
    } else {
      spdlog::warn("pass-through env: {} is not set in the server's environment", name);
    }
  }
  if (auto lang = tools::find_language(tool_cfg.default_language); !lang.ok()) {
    spdlog::error("default language: {}", lang.error().message());
    return 2;
  } else {
    tool_cfg.default_language = (*lang)->name;
  }

  auto swept = sandbox::native::sweep_leftovers();
  for (const auto& r : swept.removed)
    spdlog::info("removed leftover of a crashed predecessor: {}", r);
  for (const auto& f : swept.failed) spdlog::warn("could not remove leftover: {}", f);

  sandbox::SpecOptions pool_spec;
  pool_spec.image = tool_cfg.default_image;
  pool_spec.limits = tool_cfg.default_limits;
  pool_spec.env = tool_cfg.pass_through_env;
  sandbox::native::PoolPolicy pool;
  pool.min = static_cast<size_t>(cfg.pool_size);
  pool.max = static_cast<size_t>(cfg.pool_max);
  pool.memory_budget_bytes = static_cast<uint64_t>(cfg.pool_memory_mb) * sandbox::kMiB;
  pool.server_cap = static_cast<size_t>(cfg.max_sandboxes);
  auto backend = service::make_backend(cfg, allow_weak, pool_spec, pool,
                              image_store ? sandbox::native::store_resolver(*image_store)
                                          : sandbox::native::ImageResolver{},
                              // Only the server holding the state dir's lock
                              // mounts (and sweeps) persistent storage.
                              state_lock ? cfg.state_dir + "/sandboxes" : std::string());
  tools::SandboxManager manager(*backend, manager_opts, sandbox_store.get());
  // Persistent sandboxes of the last run come back as stopped (issue 16).
  if (auto s = manager.recover(); !s.ok()) {
    spdlog::error("recovering sandboxes: {}", s.error().message());
    return 1;
  }

  // File links (HTTP only): signed URLs served from the sandboxes.
  std::unique_ptr<transport::http::FileLinks> links;
  if (http_mode) {
    const uint64_t max_file = tool_cfg.max_file_bytes;
    links = std::make_unique<transport::http::FileLinks>(
        "", std::chrono::seconds(cfg.file_link_ttl_s),
        [&manager, max_file, budget = tool_cfg.transfer_budget](
            const std::string& id, const std::string& owner,
            const std::string& path) -> Result<std::string> {
          auto e = manager.get(id, owner);
          if (!e.ok())
            return Error::make(ErrorCode::kNotFound,
                               "sandbox " + id + " not found (closed or expired)");
          tools::EntryUse use(*e);
          // The lease ends with this call: the link's body copy is what
          // the transport holds while it sends.
          auto read = tools::read_bounded(use->sandbox(), *budget, path, 0, std::nullopt, max_file,
                                          tools::kLinkCopies);
          if (!read.ok()) return read.take_error();
          auto* file = &read->file;
          if (file->too_large)
            return Error::make(ErrorCode::kFailedPrecondition,
                               "the file is " + std::to_string(file->size) + " bytes, above the " +
                                   std::to_string(max_file) + "-byte limit of a file link");
          return std::move(file->data);
        });
    tool_cfg.file_link = [l = links.get()](const std::string& id, const std::string& path) {
      return l->link(id, path);
    };
  }
  tools::ToolEnv tool_env{manager, tool_cfg, image_store.get(), sandbox_store.get()};

  mcp::ServerInfo info;
  info.instructions = kInstructions;
  mcp::ServerOptions options;
  options.page_size = static_cast<size_t>(cfg.page_size);
  mcp::Server server(info, options);
  tools::register_sandbox_tools(server, tool_env);
  if (test_fixtures) mcp::register_test_fixtures(server);
  // The service layer the REST API and the console call (service/sandboxes.h).
  service::Sandboxes sandboxes(tool_env, server);

  metrics::registry().gauge_fn(metrics::name::kSandboxesLive, "sandboxes alive now",
                               [&manager] { return static_cast<double>(manager.live_count()); });

  manager.start();
  int rc = 0;
  if (!http_mode) {
    transport::StdioOptions stdio;
    stdio.max_line_bytes = static_cast<size_t>(cfg.max_message_bytes);
    rc = transport::serve_stdio(server, stdio);
  } else {
    transport::http::McpHttpOptions hopts;
    hopts.allowed_origins = cfg.allowed_origins;
    hopts.cors_origins = cfg.cors_origins;
    hopts.allowed_hosts = cfg.allowed_hosts;
    if (hopts.allowed_hosts.empty() && is_loopback_host(cfg.host))
      hopts.allowed_hosts = {"localhost", "127.0.0.1", "[::1]"};
    hopts.auth_required = cfg.auth_enabled;
    if (key_store)
      hopts.verify_key = [ks = key_store.get()](const std::string& k) { return ks->verify(k); };
    hopts.on_owner_gone = [&manager](const std::string& owner) {
      size_t n = manager.close_owned_by(owner);
      if (n) spdlog::info("closed {} sandbox(es) of ended {}", n, owner);
    };
    hopts.files_handler = [l = links.get()](const transport::http::Request& req,
                                            std::shared_ptr<transport::http::Exchange> ex) {
      l->serve(req, ex);
    };
    hopts.landing.public_url = cfg.public_url;
    hopts.keepalive = std::chrono::milliseconds(cfg.keepalive_ms);
    hopts.session_idle_ttl = std::chrono::seconds(cfg.session_idle_ttl_s);
    hopts.max_sessions = static_cast<size_t>(cfg.max_sessions);
    transport::http::McpHttp mcp_http(server, hopts);
    web::RestOptions ropts;  // the REST API and the console share the route table
    ropts.auth_required = cfg.auth_enabled;
    ropts.keys = key_store.get();
    ropts.secure_cookies = cfg.public_url.rfind("https://", 0) == 0;
    ropts.version = server.info().version;
    ropts.backend = backend->name();
    ropts.sandboxes = &sandboxes;
    ropts.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
    web::RestApi rest(ropts);
    rest.add_routes(mcp_http.router());
    transport::http::ServerOptions sopts;
    sopts.host = cfg.host;
    sopts.port = static_cast<uint16_t>(cfg.port);
    sopts.threads = static_cast<size_t>(cfg.threads);
    sopts.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
    sopts.request_timeout = std::chrono::milliseconds(cfg.request_timeout_ms);
    transport::http::Server http(sopts, [&mcp_http](transport::http::Request&& req,
                                                    std::shared_ptr<transport::http::Exchange> ex) {
      mcp_http.handle(std::move(req), std::move(ex));
    });
    auto port = http.listen();
    if (!port.ok()) {
      spdlog::error("{}", port.error().message());
      manager.shutdown();
      backend->shutdown();
      _exit(2);
    }
    std::string host_for_url =
        cfg.host.find(':') != std::string::npos ? "[" + cfg.host + "]" : cfg.host;
    if (cfg.host == "0.0.0.0") host_for_url = "127.0.0.1";
    std::string base = "http://" + host_for_url + ":" + std::to_string(*port);
    links->set_base_url(cfg.public_url.empty() ? base : cfg.public_url);
    mcp_http.attach(http);
    http.start();
    // Tests and scripts read this line to find an ephemeral port.
    (void)std::fprintf(stderr,
                       "listening on %s/mcp (Streamable HTTP), %s/sse (HTTP+SSE); auth %s\n",
                       base.c_str(), base.c_str(), cfg.auth_enabled ? "required" : "off");
    // What to paste into a client. stderr: stdout is never written in any
    // transport (it is the stdio transport's MCP channel).
    std::string shown_base = cfg.public_url.empty() ? base : cfg.public_url;
    while (!shown_base.empty() && shown_base.back() == '/') shown_base.pop_back();
    transport::http::ClientEndpoint endpoint{shown_base + "/mcp", cfg.auth_enabled,
                                             is_loopback_host(host_for_url)};
    (void)std::fputs(
        transport::http::startup_client_text(endpoint, shown_base, self_path()).c_str(), stderr);
    (void)std::fflush(stderr);
    wait_for_termination();
    http.stop_accepting();
    mcp_http.shutdown(std::chrono::milliseconds(1000), std::chrono::milliseconds(700));
    rest.shutdown();  // its event streams end while the server can still send
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let final writes flush
    http.stop();
  }
  manager.shutdown();
  // Every sandbox, spare cgroup, the zygote and the runtime directory go now:
  // _exit below runs no destructor.
  backend->shutdown();
  // The history's last writes, then the mark that lets the next start skip
  // reading the whole database.
  sandbox_store->flush();
  state_db->mark_clean_stop();
  spdlog::default_logger()->flush();
  // Handlers that ignored cancellation may still hold threads; end the process
  // without running static destructors underneath them.
  (void)std::fflush(stdout);
  (void)std::fflush(stderr);
  _exit(rc);
}
