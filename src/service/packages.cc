// install_packages and check_package_installation_status: pip or npm runs
// inside the sandbox, and only it gets a network path — through the server's
// proxy (net::ProxyService), under a policy of its own that reaches nothing
// but the configured package indexes, listening in a network namespace made
// for the installer alone, so no other program of the sandbox can use it. Packages land in
// /workspace/.sandcastle/{python,node} and are on PYTHONPATH/NODE_PATH for every later command in
// that sandbox.
//
// The host's own trust store and proxy reach the installer: the CA files the
// server's SSL_CERT_FILE, REQUESTS_CA_BUNDLE, PIP_CERT and NODE_EXTRA_CA_CERTS
// name are published read-only to the sandbox as one bundle, and the proxy
// chains through the server's HTTPS_PROXY/HTTP_PROXY (NO_PROXY honoured). A failure says its cause
// in one line first (install_diagnosis.h); the whole installer log is saved in the sandbox.
#include "service/packages.h"

#include <fcntl.h>
#include <spdlog/fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/json_parse.h"
#include "net/http_head.h"
#include "net/proxy_service.h"
#include "net/upstream.h"
#include "service/dockerfile.h"
#include "service/install_diagnosis.h"
#include "service/languages.h"
#include "service/op_args.h"
#include "service/sandbox_uri.h"
#include "service/sandbox_view.h"

namespace sandcastle::service {

namespace {

// Package specs are names with optional version constraints; anything that
// looks like an option ("--index-url=...") or a path/URL is refused, so a
// package name cannot redirect the installer.
bool valid_spec(const std::string& manager, const std::string& spec) {
  static const std::regex kPip(
      R"(^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?(\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!-]+(\s*,\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!-]+)*)?$)");
  static const std::regex kNpm(
      R"(^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9.^~<>=*|+ -]+)?$)");
  if (spec.size() > 200) return false;
  return std::regex_match(spec, manager == "pip" ? kPip : kNpm);
}

// The bare package name of a spec ("numpy>=1.2" → "numpy", "@a/b@1" → "@a/b").
std::string base_name(const std::string& manager, const std::string& spec) {
  if (manager == "npm") {
    auto at = spec.find('@', spec[0] == '@' ? 1 : 0);
    return at == std::string::npos ? spec : spec.substr(0, at);
  }
  auto end = spec.find_first_of("[=<>!~ ");
  return end == std::string::npos ? spec : spec.substr(0, end);
}

// PEP 503 normalisation (npm names are compared as they are).
std::string normalized_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '-' || c == '_' || c == '.') {
      if (out.empty() || out.back() != '-') out += '-';
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

// The versions pip reports on its last line ("Successfully installed
// a-1.0 b_c-2.0"), by normalised name. The text is the sandbox's (hostile):
// only the first 64 KiB of that line is read, and a version that is not a
// PEP 440 version is dropped. npm names no versions in its summary: see
// npm_versions.
std::map<std::string, std::string> installed_versions(const std::string& manager,
                                                      const std::string& out) {
  std::map<std::string, std::string> v;
  if (manager != "pip") return v;
  const std::string marker = "Successfully installed ";
  auto at = out.rfind(marker);
  if (at == std::string::npos) return v;
  auto end = out.find('\n', at);
  const std::size_t from = at + marker.size();
  const std::size_t line = (end == std::string::npos ? out.size() : end) - from;
  std::istringstream words(out.substr(from, std::min<std::size_t>(line, std::size_t{64} << 10)));
  for (std::string w; words >> w && v.size() < 1000;) {
    auto dash = w.rfind('-');
    if (dash == std::string::npos || dash == 0) continue;
    const std::string version = w.substr(dash + 1);
    if (valid_pep440_version(version)) v[normalized_name(w.substr(0, dash))] = version;
  }
  return v;
}

// The versions npm installed, read from each named package's package.json
// inside the sandbox (through its file worker: the file is the sandbox's, a
// hostile input): at most 64 KiB each, parsed with a depth and value limit,
// and kept only when "version" is an exact semver. 64 packages at most: a
// long list is a rare install, and each read is a round trip.
constexpr std::size_t kPackageJsonMax = std::size_t{64} << 10;

std::map<std::string, std::string> npm_versions(sandbox::Sandbox& sb,
                                                const std::vector<std::string>& names) {
  std::map<std::string, std::string> v;
  for (const auto& name : names) {
    if (v.size() >= 64) break;
    if (!valid_npm_name(name)) continue;
    const std::string path = std::string(kNodePackages) + "/node_modules/" + name + "/package.json";
    auto f = sb.read_file(path, {0, kPackageJsonMax, true});
    if (!f.ok() || f->too_large) continue;
    auto j = parse_json(f->data, {kPackageJsonMax, 16, 4096, nullptr});
    if (!j.ok() || !j->is_object()) continue;
    auto it = j->find("version");
    if (it == j->end() || !it->is_string()) continue;
    const std::string version = it->get<std::string>();
    if (valid_semver(version)) v[name] = version;
  }
  return v;
}

// The proxy's port in the installer's own network namespace. Every port is
// free there, so a fixed one (the usual proxy port) can go into the
// installer's arguments before the listener exists.
constexpr uint16_t kProxyPort = 3128;

std::string tail(const std::string& s, size_t n) {
  return s.size() <= n ? s : "…" + s.substr(s.size() - n);
}

// What the installer takes from the host: its CA files (its proxy is the
// ProxyService's upstream, read at start by the app).
struct HostInstallerSettings {
  std::string ca_bundle;                // PEM; empty when the host names no CA file
  std::vector<std::string> ca_sources;  // the files it was made of
};

constexpr const char* kCaBundleName = "installer-ca.pem";
// npm's own node-gyp (its default for the node-gyp setting).
constexpr const char* kNpmNodeGyp =
    "/usr/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js";
constexpr size_t kMaxCaFileBytes = size_t{4} * 1024 * 1024;

std::string read_ca_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  struct stat st {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      static_cast<size_t>(st.st_size) > kMaxCaFileBytes)
    return {};
  std::string data(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < data.size()) {
    ssize_t n = ::read(fd.get(), data.data() + got, data.size() - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data.find("-----BEGIN CERTIFICATE-----") == std::string::npos ? std::string() : data;
}

// Read once, at start, from the server's environment.
const HostInstallerSettings& host_installer_settings() {
  static const HostInstallerSettings kSettings = [] {
    HostInstallerSettings s;
    std::set<std::string> seen;
    std::vector<std::string> named;
    for (const char* var :
         {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"}) {
      const char* v = std::getenv(var);
      if (v && *v) named.emplace_back(v);
    }
    // The system bundle first: NODE_EXTRA_CA_CERTS adds to the defaults, and
    // pip's --cert replaces them, so the union keeps both meanings.
    if (!named.empty()) named.insert(named.begin(), "/etc/ssl/certs/ca-certificates.crt");
    for (const auto& path : named) {
      char real[PATH_MAX];
      std::string key = ::realpath(path.c_str(), real) ? std::string(real) : path;
      if (!seen.insert(key).second) continue;
      std::string pem = read_ca_file(key);
      if (pem.empty()) {
        spdlog::warn(
            "package installs: CA file {} is not a readable PEM file of at most {} MiB; left out",
            path, kMaxCaFileBytes >> 20);
        continue;
      }
      s.ca_bundle += pem;
      if (s.ca_bundle.back() != '\n') s.ca_bundle += '\n';
      s.ca_sources.push_back(path);
    }
    if (s.ca_sources.size() > 1 || (s.ca_sources.size() == 1 && named.size() == 1))
      spdlog::info("package installs trust the CA files {}", fmt::join(s.ca_sources, ", "));
    return s;
  }();
  return kSettings;
}

std::atomic<uint64_t> g_install_counter{0};

// The installer's policy: exactly the configured index hosts, each an exact
// host:port rule. They are the operator's, so they are also trusted: an
// index on loopback or a private network stays reachable (for that host and
// port only), which no sandbox's own rules can grant.
std::shared_ptr<const net::Policy> installer_policy(const std::vector<std::string>& urls) {
  net::Policy p;
  p.mode = net::Mode::kAllowList;
  for (const auto& url : urls) {
    auto hp = net::rule_from_url(url);
    if (!hp.ok()) continue;
    auto rule = net::parse_rule(net::authority(hp->host, hp->port), net::ListKind::kAllow);
    if (!rule.ok()) {
      spdlog::warn("package installs: the index {} is not a host the proxy can allow: {}",
                   redact_url(url), rule.error().message());
      continue;
    }
    p.allow.push_back(*rule);
    p.trusted.push_back(*rule);
  }
  return std::make_shared<const net::Policy>(std::move(p));
}

// The whole installer log, as a file in the sandbox (bounded: the exec keeps
// at most 256 KiB of each stream). Returns its absolute path, or "" when it
// could not be written (a full disk).
std::string save_log(sandbox::Sandbox& sb, const std::string& manager,
                     const std::vector<std::string>& argv, const sandbox::ExecResult& r,
                     const std::string& outcome) {
  const std::string path = std::string("/workspace/.sandcastle/logs/") + manager + "-install-" +
                           std::to_string(++g_install_counter) + ".log";
  std::string log = "$";
  for (const auto& a : argv) {
    log += ' ';
    log += redact_url(a);
  }
  log += "\n" + outcome + "\n";
  for (auto [name, data, total, cut] :
       {std::tuple{"stdout", &r.stdout_data, r.stdout_total, r.stdout_truncated},
        std::tuple{"stderr", &r.stderr_data, r.stderr_total, r.stderr_truncated}}) {
    log += std::string("\n----- ") + name + " (" + std::to_string(total) + " bytes" +
           (cut ? ", the middle left out" : "") + ") -----\n" + *data;
    if (!data->empty() && data->back() != '\n') log += '\n';
  }
  if (auto st = sb.write_file(path, log, 0644, /*parents=*/true); !st.ok()) {
    spdlog::info("install log not saved in the sandbox: {}", st.error().message());
    return {};
  }
  return path;
}

struct InstallJob {
  std::shared_ptr<SandboxEntry> entry;
  std::string manager;
  std::vector<std::string> specs;
  std::chrono::milliseconds timeout;
};

// Runs the installer to completion and records each package's outcome.
json run_install(Env& env, const InstallJob& job) {
  EntryUse use(job.entry);
  const HostInstallerSettings& host = host_installer_settings();
  const std::string index =
      job.manager == "pip" ? env.config.pip_index_url : env.config.npm_registry;
  // Its own session: the sandbox's network policy (if any) neither widens
  // nor narrows what the installer reaches.
  auto session = std::make_shared<net::Session>(
      use->id() + "/installer",
      installer_policy(job.manager == "pip" ? env.config.pip_hosts() : env.config.npm_hosts()));
  net::ProxyService* proxies = env.manager.options().proxies;
  const std::string proxy_url = "http://127.0.0.1:" + std::to_string(kProxyPort);

  sandbox::ExecRequest req;
  req.private_listener_port = kProxyPort;
  req.timeout = job.timeout;
  req.output.max_bytes = std::size_t{256} * 1024;
  // The installer holds the sandbox's only way out, so nothing of the
  // sandbox's may steer it into running other code: not the sandbox's
  // configured environment (LD_PRELOAD, PYTHONPATH, NODE_OPTIONS, ...), not
  // modules in the working directory or the user site (python -I), not pip
  // configuration (--isolated).
  req.spec_env = false;
  req.cwd = "/";
  req.env = {{"HTTP_PROXY", proxy_url},
             {"HTTPS_PROXY", proxy_url},
             {"http_proxy", proxy_url},
             {"https_proxy", proxy_url},
             {"HOME", "/tmp"}};
  // The host's CA files, as one read-only bundle in the server's shared
  // directory (a sandbox cannot change what its installer trusts).
  std::string ca_path;
  if (!host.ca_bundle.empty()) {
    sandbox::Sandbox& sb = use->sandbox();
    Status st =
        sb.has_shared(kCaBundleName) ? Status{} : sb.publish_shared(kCaBundleName, host.ca_bundle);
    if (st.ok()) {
      ca_path = std::string(sandbox::kSharedDir) + "/" + kCaBundleName;
      for (const char* var :
           {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS"})
        req.env[var] = ca_path;
    } else {
      spdlog::warn("package installs: the host's CA bundle cannot be shared with sandbox {}: {}",
                   use->id(), st.error().message());
    }
  }
  if (job.manager == "pip") {
    req.argv = {"/usr/bin/python3",
                "-I",
                "-m",
                "pip",
                "install",
                "--isolated",
                "--no-input",
                "--disable-pip-version-check",
                "--no-warn-script-location",
                "--no-cache-dir",
                "--upgrade",
                "--target",
                kPythonPackages,
                "--index-url",
                index,
                "--proxy",
                proxy_url};
    if (!ca_path.empty())
      req.argv.insert(req.argv.end(), {"--cert", ca_path});  // --isolated ignores PIP_CERT
    if (index.rfind("http://", 0) == 0) {
      auto r = net::rule_from_url(index);
      if (r.ok()) req.argv.insert(req.argv.end(), {"--trusted-host", r->host});
    }
  } else {
    req.argv = {"/usr/bin/npm", "install", "--prefix", kNodePackages, "--registry", index,
                "--proxy", proxy_url, "--https-proxy", proxy_url, "--no-audit", "--no-fund",
                "--no-update-notifier", "--cache", "/tmp/.npm", "--loglevel", "error",
                // npm's default back-off (10 s to 60 s) makes a failure that
                // no retry mends (a refused certificate) take over a minute.
                "--fetch-retry-mintimeout", "1000", "--fetch-retry-maxtimeout", "5000",
                // npm reads .npmrc from $HOME and from the prefix, both the
                // sandbox's to write, and command-line settings win over
                // both: none of its own, and every setting that names a
                // program to run pinned.
                "--userconfig", "/dev/null", "--script-shell", "/bin/sh",
                "--node-options=", "--git", "git", "--shell", "/bin/sh"};
    req.argv.insert(req.argv.end(),
                    {"--node-gyp", ::access(kNpmNodeGyp, R_OK) == 0 ? kNpmNodeGyp : "/bin/false"});
  }
  req.argv.insert(req.argv.end(), job.specs.begin(), job.specs.end());
  // The proxy serves from the moment the sandbox hands over the listener
  // (before the installer starts) until the installer's exec has ended.
  std::unique_ptr<net::Attachment> attachment;
  sandbox::ExecCallbacks callbacks;
  callbacks.on_listener = [&](UniqueFd listener) {
    if (proxies == nullptr) {
      session->record_failure("this server runs no network proxies");
      return;
    }
    net::Listeners l;
    l.http = std::move(listener);
    auto a = proxies->attach(session, std::move(l));
    if (a.ok()) {
      attachment = std::move(*a);
    } else {
      spdlog::warn("package installs: the proxy cannot serve sandbox {}'s installer: {}", use->id(),
                   a.error().message());
      session->record_failure("the server's proxy could not serve the installer");
    }
  };
  auto r = use->sandbox().exec(req, callbacks);
  attachment.reset();

  auto fail_all = [&](const std::string& cause, const std::string& why, const std::string& log) {
    std::string record = why + (log.empty() ? "" : "; full installer log: " + log);
    for (const auto& s : job.specs)
      use->set_package(
          {base_name(job.manager, s), job.manager, PackageState::kFailed, record, {}, {}});
    json out{{"status", "failed"}, {"cause", cause}, {"error", why}};
    if (!log.empty()) {
      std::string rel = log.substr(std::string("/workspace/").size());
      json l{{"path", log}, {"uri", sandbox_resource_uri(use->id(), rel)}};
      if (env.config.file_link) l["url"] = env.config.file_link(use->owner(), use->id(), rel);
      out["log"] = l;
    }
    return out;
  };
  if (!r.ok())
    return fail_all("installer_failed", "the installer could not run: " + r.error().message(), "");
  if (r->reason == sandbox::EndReason::kTimeout)
    return fail_all("timeout",
                    "timeout: the installer ran past its " +
                        std::to_string(job.timeout.count() / 1000) +
                        " s timeout; retry with a larger timeout_s or fewer packages",
                    save_log(use->sandbox(), job.manager, req.argv, *r, "ended: timeout"));
  if (r->status() != 0) {
    const auto refusals = session->last_refusals();
    const std::string denied = refusals.empty() ? std::string() : refusals.back().target;
    const std::string proxy_failure = session->last_failure();
    InstallDiagnosis d = diagnose_install({job.manager, r->status(), r->stdout_data, r->stderr_data,
                                           index, denied, !ca_path.empty(), proxy_failure});
    spdlog::info("install in sandbox {} failed: {}", use->id(), d.summary);
    return fail_all(
        d.cause, d.summary,
        save_log(use->sandbox(), job.manager, req.argv, *r,
                 "exit status " + std::to_string(r->status()) + "; cause: " + d.summary));
  }
  std::map<std::string, std::string> versions;
  if (job.manager == "npm") {
    std::vector<std::string> names;
    for (const auto& s : job.specs) names.push_back(base_name(job.manager, s));
    versions = npm_versions(use->sandbox(), names);
  } else {
    versions = installed_versions(job.manager, r->stdout_data);
  }
  for (const auto& s : job.specs) {
    const std::string name = base_name(job.manager, s);
    auto v = versions.find(job.manager == "npm" ? name : normalized_name(name));
    use->set_package({name,
                      job.manager,
                      PackageState::kSuccess,
                      "",
                      {},
                      v == versions.end() ? std::string() : v->second});
  }
  return json{{"status", "success"}, {"output", tail(r->stdout_data, 2000)}};
}

json packages_json(const SandboxEntry& e) {
  json out = json::array();
  for (const auto& p : e.packages()) {
    json j{{"package", p.name},
           {"manager", p.manager},
           {"status", package_state_name(p.state)},
           {"updated", iso_time(p.updated)}};
    if (!p.error.empty()) j["error"] = p.error;
    if (!p.version.empty()) j["version"] = p.version;
    out.push_back(j);
  }
  return out;
}

}  // namespace

json install_input_schema() {
  return json{
      {"type", "object"},
      {"properties",
       {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
        {"packages",
         {{"type", "array"},
          {"items", {{"type", "string"}, {"minLength", 1}}},
          {"minItems", 1},
          {"maxItems", 50},
          {"description",
           "Package names, optionally with versions (\"numpy>=1.26\", \"lodash@4\")."}}},
        {"manager",
         {{"type", "string"},
          {"enum", {"pip", "npm"}},
          {"description", "Default: pip for python sandboxes, npm for javascript."}}},
        {"wait", {{"type", "boolean"}, {"default", true}}},
        {"timeout_s", {{"type", "number"}, {"minimum", 1}, {"maximum", 3600}, {"default", 300}}}}},
      {"required", {"sandbox_id", "packages"}},
      {"additionalProperties", false}};
}

json install_output_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"status", {{"type", "string"}}},
                {"packages", {{"type", "array"}}},
                {"cause", {{"type", "string"}}},
                {"error", {{"type", "string"}}},
                {"log", {{"type", "object"}}}}},
              {"required", {"status", "packages"}}};
}

json package_status_input_schema() {
  return json{{"type", "object"},
              {"properties",
               {{"sandbox_id", {{"type", "string"}}},
                {"package", {{"type", "string"}, {"description", "Package name."}}}}},
              {"required", {"sandbox_id"}},
              {"additionalProperties", false}};
}

void load_installer_settings() {
  (void)host_installer_settings();
}

Result<json> install_packages(Env& env, const Caller& c, const json& raw) {
  auto checked = checked_args("install_packages", install_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  auto e = env.manager.get(args["sandbox_id"], c.owner);
  if (!e.ok()) return e.error();
  std::string manager = args.value("manager", std::string());
  if (manager.empty()) {
    auto lang = find_language((*e)->language());
    manager = lang.ok() ? (*lang)->package_manager : "";
    if (manager.empty())
      return Error::make(ErrorCode::kInvalidArgument,
                         "sandbox " + (*e)->id() + " runs " + (*e)->language() +
                             ", which has no package manager; pass manager \"pip\" or \"npm\"");
  }
  InstallJob job{
      *e,
      manager,
      {},
      std::chrono::milliseconds(static_cast<int64_t>(args["timeout_s"].get<double>() * 1000))};
  for (const auto& p : args["packages"]) {
    std::string spec = p.get<std::string>();
    if (!valid_spec(manager, spec))
      return Error::make(ErrorCode::kInvalidArgument,
                         "'" + spec + "' is not a valid " + manager +
                             " package name (options, paths and URLs are not accepted)");
    job.specs.push_back(spec);
  }
  for (const auto& s : job.specs)
    (*e)->set_package({base_name(manager, s), manager, PackageState::kInstalling, "", {}, {}});
  if (!args["wait"].get<bool>()) {
    std::thread([&env, job] { run_install(env, job); }).detach();
    return json{{"status", "installing"},
                {"packages", packages_json(**e)},
                {"hint", "poll check_package_installation_status"}};
  }
  json outcome = run_install(env, job);
  json out{{"status", outcome["status"]}, {"packages", packages_json(**e)}};
  for (const char* k : {"cause", "error", "log"})
    if (outcome.contains(k)) out[k] = outcome[k];
  return out;
}

Result<json> package_status(Env& env, const Caller& c, const json& raw) {
  auto checked =
      checked_args("check_package_installation_status", package_status_input_schema(), raw);
  if (!checked.ok()) return checked.error();
  const json& args = *checked;
  auto e = env.manager.get(args["sandbox_id"], c.owner);
  if (!e.ok()) return e.error();
  if (!args.contains("package")) return json{{"packages", packages_json(**e)}};
  const std::string name = args["package"];
  for (const auto& mgr : {"pip", "npm"}) {
    auto rec = (*e)->package(base_name(mgr, name));
    if (!rec) continue;
    json j{{"package", rec->name},
           {"manager", rec->manager},
           {"status", package_state_name(rec->state)}};
    if (!rec->version.empty()) j["version"] = rec->version;
    if (!rec->error.empty()) j["error"] = rec->error;
    return j;
  }
  return json{
      {"package", name},
      {"status", "not_found"},
      {"hint", "no install of this package was requested in this sandbox; call install_packages"}};
}

}  // namespace sandcastle::service
