// install_packages and check_package_installation_status: the MCP face of
// service/packages.h. A failed install is an isError result whose text says
// the cause first and where the installer's whole log is.
#include "service/packages.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

// The service's refusals of the arguments (a bad spec, no package manager)
// read as they always have, without a code; other errors carry theirs.
ToolResult package_error(const Error& err) {
  if (err.code == ErrorCode::kInvalidArgument) return ToolResult::error(err.message());
  return error_result(err);
}

}  // namespace

void register_package_tools(mcp::Server& server, ToolEnv& env) {
  load_installer_settings();  // read (and reported) at start, not at the first install
  server.tools().add(
      {"install_packages", "Install packages",
       "Installs Python (pip) or JavaScript (npm) packages into a sandbox; they stay importable "
       "for the sandbox's lifetime. Only the installer gets network access, and only to the "
       "configured package index. With wait=false it returns at once with status \"installing\"; "
       "poll check_package_installation_status. A failure names its cause first (cause: "
       "package_not_found, no_matching_version, build_failed, index_unreachable, "
       "tls_verification_failed, blocked_by_policy, ...) and where the installer's whole log is "
       "(log.path, a file in the sandbox).",
       install_input_schema(), install_output_schema(), hints(false, false, true, true), nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto got = install_packages(env, Caller{owner_of(ctx), {}}, args);
        if (!got.ok()) return package_error(got.error());
        json& out = *got;
        // wait=false: the install goes on in the background ("installing").
        if (!args["wait"].get<bool>() || out["status"] == "success")
          return ToolResult::from_structured(std::move(out));
        // The cause first, in one line; then where the whole log is.
        std::string text = out["error"].get<std::string>();
        if (out.contains("log"))
          text += "\nFull installer log: " + out["log"]["path"].get<std::string>() +
                  " (read_file, or " + out["log"]["uri"].get<std::string>() + ")";
        ToolResult r = ToolResult::error(text, out);
        r.content.push_back({{"type", "text"}, {"text", mcp::dump_message(out)}});
        if (out.contains("log") && ctx.protocol_version() >= "2025-06-18")
          r.content.push_back({{"type", "resource_link"},
                               {"uri", out["log"]["uri"]},
                               {"name", out["log"]["path"]},
                               {"mimeType", "text/plain"}});
        return r;
      });

  server.tools().add(
      {"check_package_installation_status", "Package status",
       "Reports packages installed into a sandbox: installing, success, failed (with the "
       "installer's error) or not_found. Without package, lists all.",
       package_status_input_schema(), json{{"type", "object"}}, read_only_hints(), nullptr},
      [&env](const json& args, RequestContext& ctx) {
        auto r = package_status(env, Caller{owner_of(ctx), {}}, args);
        if (!r.ok()) return package_error(r.error());
        return ToolResult::from_structured(std::move(*r));
      });
}

}  // namespace sandcastle::tools
