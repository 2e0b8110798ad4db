// sandcastle: an MCP server that runs code in sandboxes. This file is the
// composition root: the configuration (service/app_cli.h), then the state
// (database, images, keys), the backend and the sandbox manager, the MCP
// server with its tools and the service layer, and a transport (stdio, or
// HTTP with API keys and file links). run() reads as that list.
#include "app/app.h"

#include <malloc.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "app/app_cli.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/proc_identity.h"
#include "common/thread_pool.h"
#include "config/start_checks.h"
#include "images/image_store.h"
#include "mcp/server.h"
#include "net/proxy_service.h"
#include "sandbox/native/native_backend.h"
#include "sandbox/native/sweep.h"
#include "service/backends.h"
#include "service/file_transfer.h"
#include "service/languages.h"
#include "service/sandboxes.h"
#include "store/sqlite_sandbox_store.h"
#include "store/state_lock.h"
#include "store/task_records.h"
#include "tools/profiles/profiles.h"
#include "tools/tool_env.h"
#include "transport/http/client_config.h"
#include "transport/http/file_links.h"
#include "transport/http/http_server.h"
#include "transport/http/mcp_http.h"
#include "transport/stdio/stdio_transport.h"
#include "web/rest_api.h"
#include "web/static_assets.h"

namespace sandcastle::app {

// The composition root: it alone sees every layer (service, tools, web, transports).
using namespace sandcastle::service;  // NOLINT(google-build-using-namespace)

namespace {

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

// The state database (sandbox records, packages, run history): a corrupt,
// read-only or full one stops the start with what to do, naming the path.
struct State {
  std::shared_ptr<store::StateDb> db;  // marked cleanly stopped before _exit
  std::unique_ptr<store::SqliteSandboxStore> sandboxes;
};

Result<State> open_state(const config::Config& cfg, bool check_db) {
  if (auto d = ensure_dir(cfg.state_dir); !d.ok()) return d.error();
  auto db = store::StateDb::open(
      cfg.state_dir, store::sandbox_migrations(),
      check_db ? store::IntegrityCheck::kAlways : store::IntegrityCheck::kAfterUncleanStop);
  if (!db.ok()) return db.error();
  State state;
  store::HistoryLimits history;
  history.max_bytes = static_cast<std::uint64_t>(cfg.history_max_mb) << 20;
  state.db = std::move(db).value();
  auto st = store::SqliteSandboxStore::open(state.db, history);
  if (!st.ok()) return st.error();
  state.sandboxes = std::move(st).value();
  return state;
}

// The image store (issue 15): images a sandbox may start from. Without it,
// image "host" only, and `error` says why.
struct Images {
  std::unique_ptr<images::ImageStore> store;
  std::string error;
};

Images open_images(const config::Config& cfg) {
  Images out;
  if (auto st = images::ImageStore::open(
          cfg.state_dir, images::StoreLimits{static_cast<std::uint64_t>(cfg.max_image_bytes)});
      st.ok()) {
    out.store = std::move(*st);
  } else {
    out.error = st.error().message();
  }
  return out;
}

// Settings sandcastle cannot honour refuse the start, not the first call.
bool start_settings_ok(const CommandLine& cli, const config::Loader& loader, const Images& images) {
  const config::Config& cfg = loader.config();
  config::StartInputs in;
  in.default_language = tools::canonical_language(cfg.default_language);
  in.no_store_reason = images.error;
  if (images.store)
    in.image_languages =
        [store = images.store.get()](const std::string& ref) -> Result<std::vector<std::string>> {
      auto rec = store->find(ref);
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
  for (const auto& [flag, value] : cli.foreign_flags)
    if (cli.app.count(flag)) in.foreign_flags[flag] = value;
  auto check = config::check_start_settings(cfg, in);
  for (const auto& e : check.errors) std::cerr << "sandcastle: " << e << "\n";
  for (const auto& w : check.warnings) std::cerr << "sandcastle: warning: " << w << "\n";
  return check.errors.empty();
}

// HTTP's API keys; an error (already logged) stops the start.
Result<std::unique_ptr<store::KeyStore>> open_key_store(const config::Config& cfg) {
  std::unique_ptr<store::KeyStore> key_store;
  if (!cfg.auth_enabled && !is_loopback_host(cfg.host) && !cfg.insecure) {
    spdlog::error(
        "refusing to listen on {} without API keys: anyone who can reach it could run code. "
        "Enable auth (--auth, [auth] enabled = true, after `sandcastle keys create`) or pass "
        "--insecure",
        cfg.host);
    return Error::make(ErrorCode::kFailedPrecondition, "no API keys");
  }
  auto ks = open_keys(cfg);
  if (!ks.ok()) {
    if (cfg.auth_enabled) {
      spdlog::error("API keys: {}", ks.error().message());
      return ks.error();
    }
    spdlog::warn("API keys unavailable ({}); serving without them", ks.error().message());
  } else {
    key_store = std::move(ks).value();
    if (cfg.auth_enabled && key_store->active_count() == 0)
      spdlog::warn(
          "auth is on but no API key exists yet: create one with `sandcastle keys create`");
  }
  return key_store;
}

// The manager's limits; `state_lock` is taken when this server may run
// persistent sandboxes.
ManagerOptions manager_options(const config::Config& cfg, bool http_mode,
                               std::optional<store::StateLock>& state_lock) {
  ManagerOptions manager_opts;
  manager_opts.max_sandboxes = static_cast<size_t>(cfg.max_sandboxes);
  manager_opts.max_queued_runs = static_cast<size_t>(cfg.max_queued_runs);
  manager_opts.default_ttl = std::chrono::seconds(cfg.sandbox_ttl_s);
  // Quotas apply to HTTP owners (keys, sessions); the local stdio user has none.
  if (http_mode) manager_opts.max_per_owner = static_cast<size_t>(cfg.max_per_key);
  // One server per state dir runs its persistent sandboxes (issue 16);
  // others share the rest of the state and refuse persistent: true.
  manager_opts.server_identity = self_identity();
  if (auto l = store::StateLock::try_acquire(cfg.state_dir); l.ok()) {
    state_lock = std::move(*l);
  } else {
    manager_opts.persistent_refusal = l.error().message();
    spdlog::info("persistent sandboxes are off in this server: {}", l.error().message());
  }
  return manager_opts;
}

// What every sandbox tool shares (tools/tool_env.h), from the configuration.
Result<tools::ToolConfig> tool_config(const config::Config& cfg, const CommandLine& cli) {
  tools::ToolConfig tool_cfg;
  tool_cfg.default_image = env_or("CONTAINER_IMAGE", "host");
  // Checked at start (config/start_checks.h): the images exist and have these.
  for (const auto& [flag, language] :
       {std::pair{"--python-image", "python"}, {"--js-image", "javascript"}})
    if (cli.app.count(flag) && !cli.foreign_flags.at(flag).empty())
      tool_cfg.language_images[language] = cli.foreign_flags.at(flag);
  tool_cfg.default_language = cfg.default_language;
  tool_cfg.start_ahead = cfg.start_ahead;
  tool_cfg.pip_index_url = cfg.pip_index_url;
  tool_cfg.npm_registry = cfg.npm_registry;
  tool_cfg.allowed_host_paths = cfg.allowed_host_paths;
  // Checked at start (config/start_checks.cc): every name parses.
  tool_cfg.network_default_mode =
      net::parse_mode(cfg.network_default_mode).value_or(net::Mode::kNone);
  tool_cfg.network_modes.clear();
  for (const auto& m : cfg.network_modes)
    if (auto mode = net::parse_mode(m)) tool_cfg.network_modes.push_back(*mode);
  tool_cfg.network_allow = cfg.network_allow;
  tool_cfg.network_deny = cfg.network_deny;
  for (const auto& p : cfg.network_private_allow)
    if (auto c = net::Cidr::parse(p)) tool_cfg.network_private_allow.push_back(*c);
  tool_cfg.max_image_bytes = static_cast<uint64_t>(cfg.max_image_bytes);
  tool_cfg.save_tmp_dir = cfg.state_dir;
  tool_cfg.run_result_view_html = web::asset_bytes("run_result.html").value_or("");
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
  auto lang = find_language(tool_cfg.default_language);
  if (!lang.ok()) return lang.error();
  tool_cfg.default_language = (*lang)->name;
  return tool_cfg;
}

// The proxies allowlist sandboxes reach the world through, the DNS stub full
// mode's sandboxes ask, and the package installer's proxy: always running
// (it listens only on sockets handed over by sandboxes). Connections chain
// through the host's own HTTP(S)_PROXY, NO_PROXY honoured, as curl would.
Result<std::unique_ptr<net::ProxyService>> network_proxies(const config::Config& cfg) {
  net::ProxyOptions o;
  o.resolver = cfg.network_resolver;
  o.max_per_sandbox = static_cast<std::size_t>(cfg.network_max_connections);
  std::vector<std::string> warnings;
  o.upstream =
      net::UpstreamProxies::from_env([](const char* n) { return std::getenv(n); }, &warnings);
  for (const auto& w : warnings) spdlog::warn("host proxy settings: {}", w);
  if (o.upstream.https || o.upstream.http)
    spdlog::info("sandboxes and package installs reach the network through the host's proxy{}",
                 o.upstream.no_proxy.empty() ? "" : " (NO_PROXY honoured)");
  return net::ProxyService::start(std::move(o));
}

// The backend, with a warm pool of sandboxes of the spec most creates ask for.
std::unique_ptr<sandbox::Backend> backend_for(const config::Config& cfg, const CommandLine& cli,
                                              const tools::ToolConfig& tool_cfg,
                                              const Images& images, bool persistent_storage) {
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
  return make_backend(cfg, cli.allow_weak, pool_spec, pool,
                      images.store ? sandbox::native::store_resolver(*images.store)
                                   : sandbox::native::ImageResolver{},
                      // Only the server holding the state dir's lock mounts
                      // (and sweeps) persistent storage.
                      persistent_storage ? cfg.state_dir + "/sandboxes" : std::string());
}

// File links (HTTP only): signed URLs served from the sandboxes. Sets the
// tools' file_link.
std::unique_ptr<transport::http::FileLinks> file_links(const config::Config& cfg,
                                                       SandboxManager& manager,
                                                       tools::ToolConfig& tool_cfg) {
  const uint64_t max_file = tool_cfg.max_file_bytes;
  auto links = std::make_unique<transport::http::FileLinks>(
      "", std::chrono::seconds(cfg.file_link_ttl_s),
      [&manager, max_file, budget = tool_cfg.transfer_budget](
          const std::string& id, const std::string& owner,
          const std::string& path) -> Result<std::string> {
        auto e = manager.get(id, owner);
        if (!e.ok())
          return Error::make(ErrorCode::kNotFound,
                             "sandbox " + id + " not found (closed or expired)");
        EntryUse use(*e);
        // The lease ends with this call: the link's body copy is what
        // the transport holds while it sends.
        auto read = read_bounded(use->sandbox(), *budget, path, 0, std::nullopt, max_file,
                                 kLinkCopies);
        if (!read.ok()) return read.take_error();
        auto* file = &read->file;
        if (file->too_large)
          return Error::make(ErrorCode::kFailedPrecondition,
                             "the file is " + std::to_string(file->size) + " bytes, above the " +
                                 std::to_string(max_file) + "-byte limit of a file link");
        return std::move(file->data);
      });
  tool_cfg.file_link = [l = links.get()](const std::string& owner, const std::string& id,
                                         const std::string& path) {
    return l->link(id, owner, path);
  };
  return links;
}

// The MCP server with every sandbox tool (and a test build's own).
std::unique_ptr<mcp::Server> mcp_server(const config::Config& cfg, tools::ToolEnv& tool_env,
                                        const AppHooks& hooks) {
  // Checked at start (config/start_checks.cc): a profile this build has.
  const auto profile = tools::parse_profile(cfg.profile).value_or(tools::Profile::kSandcastle);
  mcp::ServerInfo info;
  info.instructions = tools::profile_instructions(profile, kInstructions);
  mcp::ServerOptions options;
  options.page_size = static_cast<size_t>(cfg.page_size);
  auto server = std::make_unique<mcp::Server>(info, options);
  tools::register_profile_tools(*server, tool_env, profile);
  if (hooks.add_tools) hooks.add_tools(*server);
  return server;
}

// An object that lives until the process ends (deliberately never freed).
template <class T, class... Args>
T& until_exit(Args&&... args) {
  return *std::make_unique<T>(std::forward<Args>(args)...).release();
}

// Serves HTTP until SIGTERM or SIGINT; exits the process when it cannot
// listen.
void serve_http(const config::Config& cfg, mcp::Server& server, SandboxManager& manager,
                sandbox::Backend& backend, store::KeyStore* key_store,
                transport::http::FileLinks* links, Sandboxes& sandboxes) {
  transport::http::McpHttpOptions hopts;
  hopts.allowed_origins = cfg.allowed_origins;
  hopts.cors_origins = cfg.cors_origins;
  hopts.allowed_hosts = cfg.allowed_hosts;
  if (hopts.allowed_hosts.empty() && is_loopback_host(cfg.host))
    hopts.allowed_hosts = {"localhost", "127.0.0.1", "[::1]"};
  hopts.auth_required = cfg.auth_enabled;
  if (key_store)
    hopts.verify_key = [ks = key_store](const std::string& k) {
      auto id = ks->verify(k);
      // last_used_at: written off this I/O thread, at most once a minute.
      if (id && ks->use_due(*id)) ElasticPool::shared().submit([ks, i = *id] { ks->note_used(i); });
      return id;
    };
  hopts.on_owner_gone = [&manager](const std::string& owner) {
    size_t n = manager.close_owned_by(owner);
    if (n) spdlog::info("closed {} sandbox(es) of ended {}", n, owner);
  };
  hopts.files_handler = [l = links](const transport::http::Request& req,
                                    std::shared_ptr<transport::http::Exchange> ex) {
    l->serve(req, ex);
  };
  hopts.landing.public_url = cfg.public_url;
  hopts.keepalive = std::chrono::milliseconds(cfg.keepalive_ms);
  hopts.session_idle_ttl = std::chrono::seconds(cfg.session_idle_ttl_s);
  hopts.max_sessions = static_cast<size_t>(cfg.max_sessions);
  // The HTTP face (the MCP endpoint, the REST API, the server and its
  // connections) is never destroyed: run() ends the process with _exit. A
  // pool task still finishing a request after shutdown (a run that ignored
  // its cancel) answers through all three, so none may go underneath it.
  auto& mcp_http = until_exit<transport::http::McpHttp>(server, hopts);
  web::RestOptions ropts;  // the REST API and the console share the route table
  ropts.auth_required = cfg.auth_enabled;
  ropts.keys = key_store;
  ropts.secure_cookies = cfg.public_url.rfind("https://", 0) == 0;
  ropts.version = server.info().version;
  ropts.backend = backend.name();
  ropts.sandboxes = &sandboxes;
  ropts.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  ropts.allowed_origins = cfg.allowed_origins;
  ropts.max_requests_per_key = static_cast<size_t>(cfg.max_requests_per_key);
  ropts.max_streams_per_key = static_cast<size_t>(cfg.max_streams_per_key);
  ropts.max_terminals_per_key = static_cast<size_t>(cfg.max_terminals_per_key);
  auto& rest = until_exit<web::RestApi>(ropts);
  rest.add_routes(mcp_http.router());
  transport::http::ServerOptions sopts;
  sopts.host = cfg.host;
  sopts.port = static_cast<uint16_t>(cfg.port);
  sopts.threads = static_cast<size_t>(cfg.threads);
  sopts.max_body_bytes = static_cast<size_t>(cfg.max_body_bytes);
  sopts.request_timeout = std::chrono::milliseconds(cfg.request_timeout_ms);
  auto& http = until_exit<transport::http::Server>(
      sopts, [&mcp_http](transport::http::Request&& req,
                         std::shared_ptr<transport::http::Exchange> ex) {
        mcp_http.handle(std::move(req), std::move(ex));
      });
  auto port = http.listen();
  if (!port.ok()) {
    spdlog::error("{}", port.error().message());
    manager.shutdown();
    backend.shutdown();
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
  (void)std::fprintf(stderr, "listening on %s/mcp (Streamable HTTP), %s/sse (HTTP+SSE); auth %s\n",
                     base.c_str(), base.c_str(), cfg.auth_enabled ? "required" : "off");
  // What to paste into a client. stderr: stdout is never written in any
  // transport (it is the stdio transport's MCP channel).
  std::string shown_base = cfg.public_url.empty() ? base : cfg.public_url;
  while (!shown_base.empty() && shown_base.back() == '/') shown_base.pop_back();
  transport::http::ClientEndpoint endpoint{shown_base + "/mcp", cfg.auth_enabled,
                                           is_loopback_host(host_for_url)};
  (void)std::fputs(transport::http::startup_client_text(endpoint, shown_base, self_path()).c_str(),
                   stderr);
  (void)std::fflush(stderr);
  wait_for_termination();
  http.stop_accepting();
  mcp_http.shutdown(std::chrono::milliseconds(1000), std::chrono::milliseconds(700));
  rest.shutdown();  // its event streams end while the server can still send
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let final writes flush
  http.stop();
}

int run(int argc, char** argv, const AppHooks& hooks) {
  // Buffers of 1 MiB and more (file data, large replies) are mmapped and
  // given back on free. glibc otherwise raises its mmap threshold to the
  // largest size freed so far and keeps later ones in its arenas: the
  // memory a burst of large transfers once needed would stay the server's.
  mallopt(M_MMAP_THRESHOLD, 1024 * 1024);  // NOLINT(concurrency-mt-unsafe): no other thread yet

  // The command line and the configuration: defaults < config.toml <
  // environment < flags; the subcommands that need no server.
  CommandLine cli;
  define_command_line(cli, hooks);
  CLI11_PARSE(cli.app, argc, argv);
  config::Loader loader;
  if (cli.doctor->parsed()) return *run_subcommand(cli, loader);  // needs no configuration
  if (int rc = load_config(cli, loader); rc != 0) return rc;
  if (auto rc = run_subcommand(cli, loader)) return *rc;
  const config::Config& cfg = loader.config();

  // Before any thread starts (the run history's writer, the backend and
  // the pool start some): SIGTERM and SIGINT then reach only sigwait.
  transport::block_termination_signals();
  // The state before anything else, then the images.
  auto state = open_state(cfg, cli.check_db);
  if (!state.ok()) {
    std::cerr << "sandcastle: " << state.error().message() << "\n";
    return 2;
  }
  Images images = open_images(cfg);
  if (!start_settings_ok(cli, loader, images)) return 2;

  init_logging(cfg.log_level);
  if (!images.store)
    spdlog::info("image store unavailable ({}): sandboxes use image \"host\" only", images.error);
  const bool http_mode = cfg.transport == "http";
  std::unique_ptr<store::KeyStore> key_store;
  if (http_mode) {
    auto ks = open_key_store(cfg);
    if (!ks.ok()) return 2;
    key_store = std::move(ks).value();
  }

  // The backend and the sandbox manager.
  std::optional<store::StateLock> state_lock;
  ManagerOptions manager_opts = manager_options(cfg, http_mode, state_lock);
  auto tool_cfg = tool_config(cfg, cli);
  if (!tool_cfg.ok()) {
    spdlog::error("default language: {}", tool_cfg.error().message());
    return 2;
  }
  // Outlives the manager: sandboxes' and the installer's proxies (issue 19).
  auto proxies = network_proxies(cfg);
  if (!proxies.ok()) {
    spdlog::error("network proxies: {}", proxies.error().message());
    return 2;
  }
  manager_opts.proxies = proxies->get();
  auto backend = backend_for(cfg, cli, *tool_cfg, images, state_lock.has_value());
  SandboxManager manager(*backend, manager_opts, state->sandboxes.get());
  // Persistent sandboxes of the last run come back as stopped (issue 16).
  if (auto s = manager.recover(); !s.ok()) {
    spdlog::error("recovering sandboxes: {}", s.error().message());
    return 1;
  }

  // The faces: the MCP tools, and the service layer the REST API and the
  // console call (service/sandboxes.h).
  std::unique_ptr<transport::http::FileLinks> links;
  if (http_mode) links = file_links(cfg, manager, *tool_cfg);
  tools::ToolEnv tool_env{manager, *tool_cfg, images.store.get(), state->sandboxes.get()};
  // Declared before the server: its tasks write here until they stop.
  auto task_records = store::TaskRecords::open(state->db->path());
  auto server = mcp_server(cfg, tool_env, hooks);
  if (task_records.ok()) {
    store::persist_tasks(server->task_store(), **task_records);  // finished tasks outlive a restart
  } else {
    spdlog::warn("finished tasks will not survive a restart: {}", task_records.error().message());
  }
  Sandboxes sandboxes(tool_env);
  metrics::registry().gauge_fn(metrics::name::kSandboxesLive, "sandboxes alive now",
                               [&manager] { return static_cast<double>(manager.live_count()); });
  // Per live sandbox, computed at scrape time: a closed sandbox's series go.
  metrics::registry().family_fn(
      "sandcastle_sandbox_network_refused", "refusals of one sandbox's network so far", "gauge",
      [&manager] {
        metrics::Registry::Rows rows;
        for (const auto& e : manager.list_every(std::nullopt))
          if (auto session = e->network())
            rows.push_back({{{"sandbox", e->id()}}, static_cast<double>(session->stats().refused)});
        return rows;
      });

  // Serve until told to stop.
  manager.start();
  int rc = 0;
  if (http_mode) {
    serve_http(cfg, *server, manager, *backend, key_store.get(), links.get(), sandboxes);
  } else {
    transport::StdioOptions stdio;
    stdio.max_line_bytes = static_cast<size_t>(cfg.max_message_bytes);
    rc = transport::serve_stdio(*server, stdio);
  }

  manager.shutdown();
  // Every sandbox, spare cgroup, the zygote and the runtime directory go now:
  // _exit below runs no destructor.
  backend->shutdown();
  // The history's last writes, then the mark that lets the next start skip
  // reading the whole database.
  state->sandboxes->flush();
  state->db->mark_clean_stop();
  spdlog::default_logger()->flush();
  // Handlers that ignored cancellation may still hold threads; end the process
  // without running static destructors underneath them.
  (void)std::fflush(stdout);
  (void)std::fflush(stderr);
  _exit(rc);
}

}  // namespace

// The outermost boundary: an exception that gets this far (a filesystem error
// while reading the configuration, std::bad_alloc) ends the process with its
// message and status 1 rather than std::terminate's abort.
int run_app(int argc, char** argv, const AppHooks& hooks) {
  try {
    return run(argc, argv, hooks);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "sandcastle: %s\n", e.what());
  } catch (...) {
    (void)std::fprintf(stderr, "sandcastle: unknown exception\n");
  }
  return 1;
}

}  // namespace sandcastle::app
