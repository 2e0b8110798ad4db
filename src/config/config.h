// The operator's configuration: one struct with every default written here,
// filled in order from config.toml, then SANDCASTLE_* environment variables,
// then command-line flags. Each setting has one dotted name ("server.port")
// used in the file ([server] port = 8181), the environment
// (SANDCASTLE_SERVER_PORT) and error messages.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace sandcastle::config {

// The tool sets `server.profile` may name: sandcastle's own tools, or the
// drop-in face of one of the four reference servers (tools/profiles/).
inline constexpr const char* kProfiles[] = {
    "sandcastle",
    "seed-a",
    "seed-b",
    "seed-c",
    "seed-d",
};

// One engine of [[engines]] in config.toml (engine backend, several engines).
struct EngineEntry {
  std::string name;
  std::string url;       // unix:///path.sock or tcp://host:port
  std::string tls_dir;   // ca.pem, cert.pem, key.pem for a tcp:// engine
  int64_t capacity = 0;  // most live sandboxes on it; 0: only sandbox.max_sandboxes
};

struct Config {
  // [server]
  std::string transport = "stdio";  // stdio | http
  // The tool set served: sandcastle's own, or a drop-in profile of one of
  // the reference servers (kProfiles).
  std::string profile = "sandcastle";
  std::string host = "127.0.0.1";
  int64_t port = 8181;
  std::string public_url;  // base of file links; default http://host:port
  int64_t threads = 2;     // HTTP I/O threads
  int64_t max_body_bytes = int64_t{16} * 1024 * 1024;
  int64_t request_timeout_ms = 10'000;
  int64_t keepalive_ms = 15'000;
  std::string log_level = "info";
  // Room for the largest file write (32 MiB) in base64 with its envelope.
  int64_t max_message_bytes = int64_t{64} * 1024 * 1024;
  int64_t page_size = 100;
  // [auth]
  bool auth_enabled = false;
  bool insecure = false;  // allow a non-loopback bind without auth
  // [http]
  std::vector<std::string> allowed_origins;
  std::vector<std::string> allowed_hosts;  // empty: loopback names on a loopback bind, else any
  std::vector<std::string> cors_origins;
  int64_t session_idle_ttl_s = 3600;
  int64_t file_link_ttl_s = 3600;
  int64_t max_sessions = 10'000;
  // REST API, per API key (the local user is one): requests being answered,
  // open event streams, open terminals.
  int64_t max_requests_per_key = 32;
  int64_t max_streams_per_key = 8;
  int64_t max_terminals_per_key = 8;
  // [sandbox]
  std::string backend = "native";
  std::string engine;          // engine backend: unix:///path.sock or tcp://host:port ("": DOCKER_HOST or /var/run/docker.sock)
  std::string engine_tls_dir;  // ca.pem, cert.pem, key.pem for a tcp:// engine
  int64_t sandbox_ttl_s = 1800;
  int64_t pool_size = 2;
  int64_t pool_max = 64;
  int64_t pool_memory_mb = 64;
  bool start_ahead = true;  // pooled sandboxes start Python ahead (service/ahead.h)
  int64_t max_sandboxes = 64;
  int64_t max_per_key = 16;  // live sandboxes per API key or session; 0 = no quota
  int64_t max_queued_runs = 1024;  // one-shot runs that may wait at the cap; 0 = refuse at once
  std::string default_language = "python";
  std::vector<std::string> allowed_host_paths;
  std::vector<std::string> pass_through_env;
  // [limits] (defaults of every sandbox)
  int64_t memory_mb = 512;
  int64_t cpu_millis = 1000;
  int64_t pids = 256;
  int64_t disk_mb = 256;
  int64_t tmp_mb = 64;
  int64_t exec_timeout_ms = 30'000;
  // [packages]
  std::string pip_index_url = "https://pypi.org/simple";
  std::string npm_registry = "https://registry.npmjs.org";
  // [network] (issue 19)
  std::string network_default_mode = "none";
  std::vector<std::string> network_modes{"none", "allowlist"};
  std::vector<std::string> network_allow;  // the allow list of a sandbox that names none
  std::vector<std::string> network_deny;   // added to every sandbox's deny list
  std::vector<std::string> network_private_allow;  // private prefixes callers' rules may open
  std::string network_resolver;            // "" = the system's; "HOST:PORT" = that server
  int64_t network_max_connections = 256;   // open proxy connections per sandbox
  // [images]
  int64_t max_image_bytes = int64_t{8} << 30;  // unpacked size of one image
  // [history]
  int64_t history_max_mb = 256;  // run history kept in the state database (0: none)
  // [[engines]] (not a setting of its own: config.toml only; --engine adds to it)
  std::vector<EngineEntry> engines;
  // top level
  std::string state_dir;  // default $XDG_STATE_HOME/sandcastle or ~/.local/state/sandcastle
};

enum class Source { kDefault, kFile, kEnv, kFlag };
const char* source_name(Source s);

// One setting's description (for flags, errors and `config show`).
struct Setting {
  std::string name;  // "server.port"
  std::string type;  // string | integer | boolean | array of strings
  std::string help;
};
const std::vector<Setting>& settings();

class Loader {
 public:
  Loader();
  // Reads a config.toml. Errors name the file, line and key.
  Status load_file(const std::string& path);
  // Applies SANDCASTLE_<NAME> variables from `env` (e.g. SANDCASTLE_SERVER_PORT).
  Status load_env(const std::map<std::string, std::string>& env);
  // Sets one setting from text (a flag's value); lists are comma-separated.
  Status set(const std::string& name, const std::string& value, Source source = Source::kFlag);

  const Config& config() const { return cfg_; }
  Config& config() { return cfg_; }
  Source source_of(const std::string& name) const;
  // Checks cross-setting rules (port range, transport name, ...).
  Status validate() const;
  // The effective configuration as TOML, each value commented with its origin.
  std::string show() const;
  // The same as JSON: {"server.port": {"value": 8181, "source": "default"}, ...}.
  std::string show_json() const;

  struct Binding;

 private:
  Config cfg_;
  std::map<std::string, Source> sources_;
};

// $XDG_STATE_HOME/sandcastle, else ~/.local/state/sandcastle.
std::string default_state_dir();
// The process environment as a map (SANDCASTLE_* only).
std::map<std::string, std::string> sandcastle_env();
// "server.port" → "SANDCASTLE_SERVER_PORT".
std::string env_name(const std::string& setting);

}  // namespace sandcastle::config
