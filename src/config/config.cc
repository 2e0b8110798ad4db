#include "config/config.h"

#include <nlohmann/json.hpp>
#include <toml++/toml.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <variant>

extern char** environ;

namespace sandcastle::config {

namespace {

using Field = std::variant<std::string Config::*, int64_t Config::*, bool Config::*,
                           std::vector<std::string> Config::*>;

struct Entry {
  Setting setting;
  Field field;
  int64_t min = 0;
  int64_t max = 0;  // integers: inclusive range when max > min
};

const std::vector<Entry>& entries() {
  static const std::vector<Entry> kEntries = {
      {{"server.transport", "string", "stdio or http"}, &Config::transport},
      {{"server.profile", "string",
        "tool set: sandcastle (default), or a reference server's drop-in profile"},
       &Config::profile},
      {{"server.host", "string", "address the HTTP server binds"}, &Config::host},
      {{"server.port", "integer", "HTTP port (0 picks a free one)"}, &Config::port, 0, 65535},
      {{"server.public_url", "string", "base URL of file links (default http://host:port)"},
       &Config::public_url},
      {{"server.threads", "integer", "HTTP I/O threads"}, &Config::threads, 1, 64},
      {{"server.max_body_bytes", "integer", "largest accepted HTTP request body"},
       &Config::max_body_bytes,
       1024,
       int64_t{1} << 31},
      {{"server.request_timeout_ms", "integer",
        "time allowed to send a whole request (slow clients are cut off)"},
       &Config::request_timeout_ms,
       100,
       600'000},
      {{"server.keepalive_ms", "integer", "interval of keep-alive comments on SSE streams"},
       &Config::keepalive_ms,
       100,
       600'000},
      {{"server.log_level", "string", "trace, debug, info, warn, error or off"},
       &Config::log_level},
      {{"server.max_message_bytes", "integer", "largest accepted stdio message"},
       &Config::max_message_bytes,
       1024,
       int64_t{1} << 31},
      {{"server.page_size", "integer", "items per page of list results"},
       &Config::page_size,
       1,
       10'000},
      {{"auth.enabled", "boolean", "require an API key on every MCP request"},
       &Config::auth_enabled},
      {{"auth.insecure", "boolean", "allow a non-loopback address without auth"},
       &Config::insecure},
      {{"http.allowed_origins", "array of strings", "Origins accepted besides loopback ones"},
       &Config::allowed_origins},
      {{"http.allowed_hosts", "array of strings",
        "Host header names accepted (DNS-rebinding protection)"},
       &Config::allowed_hosts},
      {{"http.cors_origins", "array of strings",
        "Origins given CORS headers (\"*\" for any); empty: no CORS"},
       &Config::cors_origins},
      {{"http.session_idle_ttl_s", "integer", "seconds an untouched session lives"},
       &Config::session_idle_ttl_s,
       10,
       int64_t{7} * 24 * 3600},
      {{"http.file_link_ttl_s", "integer", "seconds a file link stays valid"},
       &Config::file_link_ttl_s,
       10,
       int64_t{30} * 24 * 3600},
      {{"http.max_sessions", "integer", "most concurrent MCP sessions"},
       &Config::max_sessions,
       1,
       1'000'000},
      {{"http.max_requests_per_key", "integer", "REST requests one key may have in progress"},
       &Config::max_requests_per_key,
       1,
       100'000},
      {{"http.max_streams_per_key", "integer", "REST event streams one key may have open"},
       &Config::max_streams_per_key,
       1,
       100'000},
      {{"http.max_terminals_per_key", "integer", "terminals one key may have open"},
       &Config::max_terminals_per_key,
       1,
       100'000},
      {{"sandbox.backend", "string", "sandbox backend: native or engine"}, &Config::backend},
      {{"sandbox.engine", "string",
        "engine backend: the Engine API (unix:///path.sock, tcp://host:port)"},
       &Config::engine},
      {{"sandbox.engine_tls_dir", "string",
        "engine backend: a directory with ca.pem, cert.pem, key.pem"},
       &Config::engine_tls_dir},
      {{"sandbox.ttl_s", "integer", "seconds an idle sandbox lives"},
       &Config::sandbox_ttl_s,
       10,
       int64_t{7} * 24 * 3600},
      {{"sandbox.pool_size", "integer", "warm sandboxes kept ready when idle (0: none made ahead)"},
       &Config::pool_size,
       0,
       1000},
      {{"sandbox.pool_max", "integer", "most warm sandboxes a burst grows the pool to"},
       &Config::pool_max,
       0,
       1000},
      {{"sandbox.pool_memory_mb", "integer", "memory the warm pool may hold"},
       &Config::pool_memory_mb,
       0,
       1 << 20},
      {{"sandbox.start_ahead", "boolean",
        "warm sandboxes start Python ahead of the one-shots that run it"},
       &Config::start_ahead},
      {{"sandbox.max_sandboxes", "integer", "server-wide cap on live sandboxes"},
       &Config::max_sandboxes,
       1,
       100'000},
      {{"sandbox.max_per_key", "integer", "live sandboxes per API key or session (0: no quota)"},
       &Config::max_per_key,
       0,
       100'000},
      {{"sandbox.max_queued_runs", "integer",
        "one-shot execute_code calls that may wait for a sandbox at the cap (0: refuse at once)"},
       &Config::max_queued_runs,
       0,
       1'000'000},
      {{"sandbox.default_language", "string", "language of execute_code without one"},
       &Config::default_language},
      {{"sandbox.allowed_host_paths", "array of strings",
        "host directories upload_file/download_file may use"},
       &Config::allowed_host_paths},
      {{"sandbox.pass_through_env", "array of strings", "host variables copied into every sandbox"},
       &Config::pass_through_env},
      {{"limits.memory_mb", "integer", "memory of a sandbox"}, &Config::memory_mb, 16, 1 << 20},
      {{"limits.cpu_millis", "integer", "CPU quota in thousandths of a core (0: unlimited)"},
       &Config::cpu_millis,
       0,
       1'000'000},
      {{"limits.pids", "integer", "processes in a sandbox"}, &Config::pids, 1, 100'000},
      {{"limits.disk_mb", "integer", "size of /workspace"}, &Config::disk_mb, 1, 1 << 20},
      {{"limits.tmp_mb", "integer", "size of /tmp (shared with /dev/shm)"},
       &Config::tmp_mb,
       1,
       1 << 20},
      {{"limits.exec_timeout_ms", "integer", "default timeout of one execution"},
       &Config::exec_timeout_ms,
       100,
       int64_t{24} * 3600 * 1000},
      {{"packages.pip_index_url", "string", "package index pip installs from"},
       &Config::pip_index_url},
      {{"packages.npm_registry", "string", "registry npm installs from"}, &Config::npm_registry},
      {{"network.default_mode", "string",
        "network mode of a sandbox that asks for none: none, allowlist or full"},
       &Config::network_default_mode},
      {{"network.modes", "array of strings",
        "network modes callers may ask for: none, allowlist, full (full needs pasta or "
        "slirp4netns, /dev/net/tun read-write and nft; checked at start)"},
       &Config::network_modes},
      {{"network.allow", "array of strings", "allow rules of an allowlist sandbox that names none"},
       &Config::network_allow},
      {{"network.deny", "array of strings", "deny rules added to every networked sandbox"},
       &Config::network_deny},
      {{"network.private_allow", "array of strings",
        "loopback/private/link-local prefixes callers' allow rules may open (default: none)"},
       &Config::network_private_allow},
      {{"network.resolver", "string",
        "DNS server the proxies ask (HOST:PORT; empty: the system's)"},
       &Config::network_resolver},
      {{"network.max_connections", "integer", "open proxy connections per sandbox"},
       &Config::network_max_connections,
       1,
       100'000},
      {{"images.max_image_bytes", "integer", "largest unpacked size of one image"},
       &Config::max_image_bytes,
       int64_t{1} << 20,
       int64_t{1} << 50},
      {{"history.max_mb", "integer",
        "MiB of run history kept in the state database (0: none recorded)"},
       &Config::history_max_mb,
       0,
       1 << 20},
      {{"state_dir", "string", "where keys and state live"}, &Config::state_dir},
  };
  return kEntries;
}

const Entry* find_entry(const std::string& name) {
  for (const auto& e : entries())
    if (e.setting.name == name) return &e;
  return nullptr;
}

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

std::string render_value(const Config& cfg, const Field& f) {
  return std::visit(
      [&](auto ptr) -> std::string {
        const auto& v = cfg.*ptr;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return quote(v);
        } else if constexpr (std::is_same_v<T, int64_t>) {
          return std::to_string(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          return v ? "true" : "false";
        } else {
          std::string out = "[";
          for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + quote(v[i]);
          return out + "]";
        }
      },
      f);
}

Error range_error(const Entry& e, int64_t v, const std::string& where) {
  return Error::make(ErrorCode::kInvalidArgument, where + "'" + e.setting.name + "' must be between " +
                                                      std::to_string(e.min) + " and " + std::to_string(e.max) +
                                                      ", got " + std::to_string(v));
}

}  // namespace

const char* source_name(Source s) {
  switch (s) {
    case Source::kDefault: return "default";
    case Source::kFile: return "config file";
    case Source::kEnv: return "environment";
    case Source::kFlag: return "flag";
  }
  return "?";
}

const std::vector<Setting>& settings() {
  static const std::vector<Setting> kSettings = [] {
    std::vector<Setting> out;
    for (const auto& e : entries()) out.push_back(e.setting);
    return out;
  }();
  return kSettings;
}

std::string env_name(const std::string& setting) {
  std::string out = "SANDCASTLE_";
  for (char c : setting) out.push_back(c == '.' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
  return out;
}

std::string default_state_dir() {
  if (const char* x = std::getenv("XDG_STATE_HOME"); x && *x) return std::string(x) + "/sandcastle";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/state/sandcastle";
}

std::map<std::string, std::string> sandcastle_env() {
  std::map<std::string, std::string> out;
  for (char** e = environ; e && *e; ++e) {
    std::string kv(*e);
    if (kv.rfind("SANDCASTLE_", 0) != 0) continue;
    auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

Loader::Loader() = default;

Source Loader::source_of(const std::string& name) const {
  auto it = sources_.find(name);
  return it == sources_.end() ? Source::kDefault : it->second;
}

Status Loader::load_file(const std::string& path) {
  toml::table tbl;
  try {
    tbl = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    return Error::make(ErrorCode::kInvalidArgument,
                       path + ":" + std::to_string(e.source().begin.line) + ":" +
                           std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  // [[engines]]: an array of tables, each key checked.
  if (const toml::node* engines = tbl.get("engines")) {
    const std::string where = path + ":" + std::to_string(engines->source().begin.line) + ": ";
    const toml::array* arr = engines->as_array();
    if (!arr || !arr->is_array_of_tables())
      return Error::make(ErrorCode::kInvalidArgument,
                         where + "'engines' must be an array of tables ([[engines]])");
    std::vector<EngineEntry> out;
    for (const auto& item : *arr) {
      const toml::table& t = *item.as_table();
      const std::string at = path + ":" + std::to_string(t.source().begin.line) + ": [[engines]] ";
      EngineEntry e;
      for (const auto& kv : t) {
        const std::string key(kv.first.str());
        const toml::node& v = kv.second;
        if (key == "name" || key == "url" || key == "tls_dir") {
          if (!v.is_string())
            return Error::make(ErrorCode::kInvalidArgument, at + "'" + key + "' must be a string");
          (key == "name"  ? e.name
           : key == "url" ? e.url
                          : e.tls_dir) = v.value<std::string>().value_or("");
        } else if (key == "capacity") {
          const int64_t c = v.value<int64_t>().value_or(-1);
          if (!v.is_integer() || c < 0 || c > 1'000'000)
            return Error::make(ErrorCode::kInvalidArgument,
                               at + "'capacity' must be an integer between 0 and 1000000");
          e.capacity = c;
        } else {
          return Error::make(ErrorCode::kInvalidArgument,
                             at + "unknown key '" + key + "' (name, url, tls_dir, capacity)");
        }
      }
      if (e.url.empty()) return Error::make(ErrorCode::kInvalidArgument, at + "needs a 'url'");
      if (e.name.empty()) e.name = "engine" + std::to_string(out.size() + 1);
      for (const auto& o : out)
        if (o.name == e.name)
          return Error::make(ErrorCode::kInvalidArgument,
                             at + "name '" + e.name + "' is used twice");
      out.push_back(std::move(e));
    }
    cfg_.engines = std::move(out);
    tbl.erase("engines");
  }
  // Walks every leaf: unknown keys and wrong types are errors naming key and line.
  std::function<Status(const toml::table&, const std::string&)> walk =
      [&](const toml::table& t, const std::string& prefix) -> Status {
    // Not a structured binding: clang 14 cannot capture those in the lambdas below.
    for (const auto& kv : t) {
      const auto& k = kv.first;
      const toml::node& node = kv.second;
      std::string name = prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
      std::string where = path + ":" + std::to_string(node.source().begin.line) + ": ";
      const Entry* e = find_entry(name);
      if (!e && node.is_table()) {
        bool section = false;
        for (const auto& en : entries())
          if (en.setting.name.rfind(name + ".", 0) == 0) section = true;
        if (!section)
          return Error::make(ErrorCode::kInvalidArgument, where + "unknown section [" + name + "]");
        if (auto s = walk(*node.as_table(), name); !s.ok()) return s;
        continue;
      }
      if (!e) return Error::make(ErrorCode::kInvalidArgument, where + "unknown key '" + name + "'");
      auto wrong = [&] {
        return Error::make(ErrorCode::kInvalidArgument,
                           where + "'" + name + "' must be " + (e->setting.type == "integer" ? "an " : "a ") +
                               e->setting.type);
      };
      Status st = std::visit(
          [&](auto ptr) -> Status {
            auto& dst = cfg_.*ptr;
            using T = std::decay_t<decltype(dst)>;
            if constexpr (std::is_same_v<T, std::string>) {
              if (!node.is_string()) return wrong();
              dst = node.value<std::string>().value_or("");
            } else if constexpr (std::is_same_v<T, int64_t>) {
              if (!node.is_integer()) return wrong();
              int64_t v = node.value<int64_t>().value_or(0);
              if (e->max > e->min && (v < e->min || v > e->max)) return range_error(*e, v, where);
              dst = v;
            } else if constexpr (std::is_same_v<T, bool>) {
              if (!node.is_boolean()) return wrong();
              dst = node.value<bool>().value_or(false);
            } else {
              if (!node.is_array()) return wrong();
              std::vector<std::string> out;
              for (const auto& item : *node.as_array()) {
                if (!item.is_string()) return wrong();
                out.push_back(item.value<std::string>().value_or(""));
              }
              dst = std::move(out);
            }
            return ok_status();
          },
          e->field);
      if (!st.ok()) return st;
      sources_[name] = Source::kFile;
    }
    return ok_status();
  };
  return walk(tbl, "");
}

Status Loader::set(const std::string& name, const std::string& value, Source source) {
  const Entry* e = find_entry(name);
  if (!e) return Error::make(ErrorCode::kInvalidArgument, "unknown setting '" + name + "'");
  std::string where = source == Source::kEnv ? env_name(name) + ": " : "";
  Status st = std::visit(
      [&](auto ptr) -> Status {
        auto& dst = cfg_.*ptr;
        using T = std::decay_t<decltype(dst)>;
        if constexpr (std::is_same_v<T, std::string>) {
          dst = value;
        } else if constexpr (std::is_same_v<T, int64_t>) {
          size_t used = 0;
          int64_t v = 0;
          try {
            v = std::stoll(value, &used);
          } catch (const std::exception&) {
            used = 0;
          }
          if (used == 0 || used != value.size())
            return Error::make(ErrorCode::kInvalidArgument,
                               where + "'" + name + "' must be an integer, got '" + value + "'");
          if (e->max > e->min && (v < e->min || v > e->max)) return range_error(*e, v, where);
          dst = v;
        } else if constexpr (std::is_same_v<T, bool>) {
          if (value == "true" || value == "1" || value == "yes") {
            dst = true;
          } else if (value == "false" || value == "0" || value == "no") {
            dst = false;
          } else {
            return Error::make(ErrorCode::kInvalidArgument,
                               where + "'" + name + "' must be true or false, got '" + value + "'");
          }
        } else {
          std::vector<std::string> out;
          std::stringstream ss(value);
          std::string item;
          while (std::getline(ss, item, ','))
            if (!item.empty()) out.push_back(item);
          dst = std::move(out);
        }
        return ok_status();
      },
      e->field);
  if (st.ok()) sources_[name] = source;
  return st;
}

Status Loader::load_env(const std::map<std::string, std::string>& env) {
  for (const auto& e : entries()) {
    auto it = env.find(env_name(e.setting.name));
    if (it == env.end()) continue;
    if (auto st = set(e.setting.name, it->second, Source::kEnv); !st.ok()) return st;
  }
  return ok_status();
}

Status Loader::validate() const {
  if (cfg_.transport != "stdio" && cfg_.transport != "http")
    return Error::make(ErrorCode::kInvalidArgument, "'server.transport' must be stdio or http, got '" + cfg_.transport + "'");
  static const std::vector<std::string> kLevels = {"trace", "debug", "info", "warn", "error", "off"};
  if (std::find(kLevels.begin(), kLevels.end(), cfg_.log_level) == kLevels.end())
    return Error::make(ErrorCode::kInvalidArgument,
                       "'server.log_level' must be one of trace, debug, info, warn, error, off; got '" +
                           cfg_.log_level + "'");
  if (cfg_.host.empty()) return Error::make(ErrorCode::kInvalidArgument, "'server.host' must not be empty");
  return ok_status();
}

std::string Loader::show() const {
  std::string out = "# effective sandcastle configuration (file < environment < flags)\n";
  std::string section;
  // Top-level keys first (TOML puts them before any [section]).
  for (const auto& e : entries()) {
    if (e.setting.name.find('.') != std::string::npos) continue;
    out += e.setting.name + " = " + render_value(cfg_, e.field) + "  # " + source_name(source_of(e.setting.name)) + "\n";
  }
  for (const auto& e : entries()) {
    auto dot = e.setting.name.find('.');
    if (dot == std::string::npos) continue;
    std::string sec = e.setting.name.substr(0, dot);
    if (sec != section) {
      out += "\n[" + sec + "]\n";
      section = sec;
    }
    out += e.setting.name.substr(dot + 1) + " = " + render_value(cfg_, e.field) + "  # " +
           source_name(source_of(e.setting.name)) + "\n";
  }
  for (const auto& e : cfg_.engines)
    out += "\n[[engines]]  # config file\nname = " + quote(e.name) + "\nurl = " + quote(e.url) +
           "\ntls_dir = " + quote(e.tls_dir) + "\ncapacity = " + std::to_string(e.capacity) + "\n";
  return out;
}

std::string Loader::show_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : entries()) {
    nlohmann::json value = std::visit([&](auto ptr) { return nlohmann::json(cfg_.*ptr); }, e.field);
    out[e.setting.name] = {{"value", std::move(value)}, {"source", source_name(source_of(e.setting.name))}};
  }
  nlohmann::json engines = nlohmann::json::array();
  for (const auto& e : cfg_.engines)
    engines.push_back(
        {{"name", e.name}, {"url", e.url}, {"tls_dir", e.tls_dir}, {"capacity", e.capacity}});
  if (!engines.empty()) out["engines"] = {{"value", std::move(engines)}, {"source", "config file"}};
  return out.dump(2) + "\n";
}

}  // namespace sandcastle::config
