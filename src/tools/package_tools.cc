// install_packages and check_package_installation_status: pip or npm runs
// inside the sandbox, and only it gets a network path — through an egress
// proxy that reaches nothing but the configured package indexes, listening in
// a network namespace made for the installer alone, so no other program of
// the sandbox can use it. Packages land in /workspace/.sandcastle/{python,node}
// and are on PYTHONPATH/NODE_PATH for every later command in that sandbox.
#include <spdlog/spdlog.h>

#include <optional>
#include <regex>
#include <thread>

#include "sandbox/egress_proxy.h"
#include "tools/languages.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

// Package specs are names with optional version constraints; anything that
// looks like an option ("--index-url=...") or a path/URL is refused, so a
// package name cannot redirect the installer.
bool valid_spec(const std::string& manager, const std::string& spec) {
  static const std::regex kPip(R"(^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?(\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!-]+(\s*,\s*(==|>=|<=|~=|!=|<|>)\s*[A-Za-z0-9.*+!-]+)*)?$)");
  static const std::regex kNpm(R"(^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*(@[A-Za-z0-9.^~<>=*|+ -]+)?$)");
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

// The proxy's port in the installer's own network namespace. Every port is
// free there, so a fixed one (the usual proxy port) can go into the
// installer's arguments before the listener exists.
constexpr uint16_t kProxyPort = 3128;

std::string tail(const std::string& s, size_t n) { return s.size() <= n ? s : "…" + s.substr(s.size() - n); }

struct InstallJob {
  std::shared_ptr<SandboxEntry> entry;
  std::string manager;
  std::vector<std::string> specs;
  std::chrono::milliseconds timeout;
};

// Runs the installer to completion and records each package's outcome.
json run_install(ToolEnv& env, const InstallJob& job) {
  EntryUse use(job.entry);
  auto fail_all = [&](const std::string& why) {
    for (const auto& s : job.specs)
      use->set_package({base_name(job.manager, s), job.manager, PackageState::kFailed, why, {}});
    return json{{"status", "failed"}, {"error", why}};
  };
  const std::string index = job.manager == "pip" ? env.config.pip_index_url : env.config.npm_registry;
  std::vector<sandbox::EgressRule> rules;
  for (const auto& url : job.manager == "pip" ? env.config.pip_hosts() : env.config.npm_hosts()) {
    auto r = sandbox::rule_from_url(url);
    if (r.ok()) rules.push_back(*r);
  }
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
  req.env = {{"HTTP_PROXY", proxy_url}, {"HTTPS_PROXY", proxy_url}, {"http_proxy", proxy_url},
             {"https_proxy", proxy_url}, {"HOME", "/tmp"}};
  if (job.manager == "pip") {
    req.argv = {"/usr/bin/python3", "-I", "-m", "pip", "install", "--isolated", "--no-input",
                "--disable-pip-version-check", "--no-warn-script-location", "--no-cache-dir", "--upgrade",
                "--target", kPythonPackages, "--index-url", index, "--proxy", proxy_url};
    if (index.rfind("http://", 0) == 0) {
      auto r = sandbox::rule_from_url(index);
      if (r.ok()) req.argv.insert(req.argv.end(), {"--trusted-host", r->host});
    }
  } else {
    req.argv = {"/usr/bin/npm", "install", "--prefix", kNodePackages, "--registry", index,
                "--proxy", proxy_url, "--https-proxy", proxy_url, "--no-audit", "--no-fund",
                "--no-update-notifier", "--cache", "/tmp/.npm", "--loglevel", "error"};
  }
  req.argv.insert(req.argv.end(), job.specs.begin(), job.specs.end());
  // The proxy serves from the moment the sandbox hands over the listener
  // (before the installer starts) until the installer's exec has ended.
  std::optional<sandbox::EgressProxy> proxy;
  sandbox::ExecCallbacks callbacks;
  callbacks.on_listener = [&](UniqueFd listener) { proxy.emplace(std::move(listener), rules); };
  auto r = use->sandbox().exec(req, callbacks);
  if (proxy) proxy->stop();
  if (!r.ok()) return fail_all(r.error().message());
  if (r->reason == sandbox::EndReason::kTimeout)
    return fail_all("the installer ran past its " + std::to_string(job.timeout.count() / 1000) +
                    " s timeout; retry with a larger timeout_s or fewer packages");
  if (r->status() != 0) {
    std::string why = tail(r->stderr_data.empty() ? r->stdout_data : r->stderr_data, 2000);
    if (proxy && proxy->denied_count() > 0) why += "\n(the egress proxy refused hosts other than the package index)";
    return fail_all(why);
  }
  for (const auto& s : job.specs)
    use->set_package({base_name(job.manager, s), job.manager, PackageState::kSuccess, "", {}});
  return json{{"status", "success"}, {"output", tail(r->stdout_data, 2000)}};
}

json packages_json(const SandboxEntry& e) {
  json out = json::array();
  for (const auto& p : e.packages()) {
    json j{{"package", p.name}, {"manager", p.manager}, {"status", package_state_name(p.state)},
           {"updated", iso_time(p.updated)}};
    if (!p.error.empty()) j["error"] = p.error;
    out.push_back(j);
  }
  return out;
}

}  // namespace

std::vector<std::string> ToolConfig::pip_hosts() const {
  std::vector<std::string> hosts = {pip_index_url};
  // The public index serves files from a second host.
  if (pip_index_url.find("pypi.org") != std::string::npos) hosts.push_back("https://files.pythonhosted.org");
  return hosts;
}

std::vector<std::string> ToolConfig::npm_hosts() const { return {npm_registry}; }

void register_package_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(
      {"install_packages", "Install packages",
       "Installs Python (pip) or JavaScript (npm) packages into a sandbox; they stay importable for "
       "the sandbox's lifetime. Only the installer gets network access, and only to the configured "
       "package index. With wait=false it returns at once with status \"installing\"; poll "
       "check_package_installation_status.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}},
              {"packages", {{"type", "array"}, {"items", {{"type", "string"}, {"minLength", 1}}},
                            {"minItems", 1}, {"maxItems", 50},
                            {"description", "Package names, optionally with versions (\"numpy>=1.26\", \"lodash@4\")."}}},
              {"manager", {{"type", "string"}, {"enum", {"pip", "npm"}},
                           {"description", "Default: pip for python sandboxes, npm for javascript."}}},
              {"wait", {{"type", "boolean"}, {"default", true}}},
              {"timeout_s", {{"type", "number"}, {"minimum", 1}, {"maximum", 3600}, {"default", 300}}}}},
            {"required", {"sandbox_id", "packages"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"status", {{"type", "string"}}}, {"packages", {{"type", "array"}}}}},
            {"required", {"status", "packages"}}},
       json{{"readOnlyHint", false}, {"destructiveHint", false}, {"idempotentHint", true},
            {"openWorldHint", true}},
       nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
        if (!e.ok()) return error_result(e.error());
        std::string manager = args.value("manager", std::string());
        if (manager.empty()) {
          auto lang = find_language((*e)->language());
          manager = lang.ok() ? (*lang)->package_manager : "";
          if (manager.empty())
            return ToolResult::error("sandbox " + (*e)->id() + " runs " + (*e)->language() +
                                     ", which has no package manager; pass manager \"pip\" or \"npm\"");
        }
        InstallJob job{*e, manager, {}, std::chrono::milliseconds(static_cast<int64_t>(args["timeout_s"].get<double>() * 1000))};
        for (const auto& p : args["packages"]) {
          std::string spec = p.get<std::string>();
          if (!valid_spec(manager, spec))
            return ToolResult::error("'" + spec + "' is not a valid " + manager +
                                     " package name (options, paths and URLs are not accepted)");
          job.specs.push_back(spec);
        }
        for (const auto& s : job.specs)
          (*e)->set_package({base_name(manager, s), manager, PackageState::kInstalling, "", {}});
        if (!args["wait"].get<bool>()) {
          std::thread([&env, job] { run_install(env, job); }).detach();
          return ToolResult::from_structured(json{{"status", "installing"}, {"packages", packages_json(**e)},
                                                  {"hint", "poll check_package_installation_status"}});
        }
        json outcome = run_install(env, job);
        json out{{"status", outcome["status"]}, {"packages", packages_json(**e)}};
        if (outcome.contains("error")) out["error"] = outcome["error"];
        ToolResult r = ToolResult::from_structured(out);
        r.is_error = outcome["status"] != "success";
        return r;
      });

  server.tools().add(
      {"check_package_installation_status", "Package status",
       "Reports packages installed into a sandbox: installing, success, failed (with the "
       "installer's error) or not_found. Without package, lists all.",
       json{{"type", "object"},
            {"properties", {{"sandbox_id", {{"type", "string"}}},
                            {"package", {{"type", "string"}, {"description", "Package name."}}}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"}},
       json{{"readOnlyHint", true}, {"openWorldHint", false}}, nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
        if (!e.ok()) return error_result(e.error());
        if (!args.contains("package"))
          return ToolResult::from_structured(json{{"packages", packages_json(**e)}});
        const std::string name = args["package"];
        for (const auto& mgr : {"pip", "npm"}) {
          auto rec = (*e)->package(base_name(mgr, name));
          if (!rec) continue;
          json j{{"package", rec->name}, {"manager", rec->manager}, {"status", package_state_name(rec->state)}};
          if (!rec->error.empty()) j["error"] = rec->error;
          return ToolResult::from_structured(j);
        }
        return ToolResult::from_structured(json{{"package", name}, {"status", "not_found"},
            {"hint", "no install of this package was requested in this sandbox; call install_packages"}});
      });
}

}  // namespace sandcastle::tools
