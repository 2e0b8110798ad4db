#include "tools/resource_methods.h"

#include "common/base64.h"
#include "common/utf8.h"
#include "mcp/pagination.h"
#include "service/file_transfer.h"
#include "service/workspace_diff.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::RpcError;

namespace {

bool is_text_mime(const std::string& mime) {
  return mime.rfind("text/", 0) == 0 || mime == "application/json" || mime == "application/xml" ||
         mime == "application/yaml" || mime == "application/toml" || mime == "application/x-sh" ||
         mime == "image/svg+xml";
}

RpcError not_found(const RequestContext& ctx, const std::string& uri, const std::string& why) {
  // Legacy era: -32002 (resource not found); 2026-07-28: -32602.
  const int code = ctx.era() == mcp::Era::kModern ? mcp::rpc_error::kInvalidParams
                                                  : mcp::rpc_error::kResourceNotFound;
  return RpcError{code, "Resource not found: " + uri + " (" + why + ")", json{{"uri", uri}}};
}

json read_resource(ToolEnv& env, const json& params, RequestContext& ctx) {
  auto it = params.find("uri");
  if (it == params.end() || !it->is_string())
    throw RpcError{mcp::rpc_error::kInvalidParams,
                   "resources/read needs \"uri\": a sandbox://<sandbox_id>/<path> URI", nullptr};
  const std::string uri = *it;
  if (uri == kRunResultViewUri && !env.config.run_result_view_html.empty())
    return json{{"contents", json::array({json{{"uri", uri},
                                               {"mimeType", kMcpAppMime},
                                               {"text", env.config.run_result_view_html}}})}};
  auto parsed = parse_sandbox_uri(uri);
  if (!parsed)
    throw not_found(
        ctx, uri,
        "sandcastle serves sandbox://<sandbox_id>/<path> URIs, path relative to /workspace");
  auto e = env.manager.get(parsed->sandbox_id, owner_of(ctx));
  if (!e.ok()) throw not_found(ctx, uri, "no sandbox " + parsed->sandbox_id + " of yours");
  EntryUse use(*e);
  auto read = read_bounded(use->sandbox(), *env.config.transfer_budget, parsed->path, 0,
                           std::nullopt, env.config.max_file_bytes, kMcpReplyCopies);
  if (!read.ok()) throw not_found(ctx, uri, read.error().message());
  ctx.keep_until_answered(std::make_shared<ByteBudget::Lease>(std::move(read->lease)));
  auto* file = &read->file;
  if (file->too_large)
    throw RpcError{mcp::rpc_error::kInvalidParams,
                   "the file is " + std::to_string(file->size) + " bytes, above the " +
                       std::to_string(env.config.max_file_bytes) +
                       "-byte limit; read it in parts with the read_file tool (offset, length)",
                   json{{"uri", uri}, {"size", file->size}}};
  std::string* data = &file->data;
  const std::string mime = mime_type_for(parsed->path);
  json content{{"uri", uri}, {"mimeType", mime}};
  if ((is_text_mime(mime) || mime == "application/octet-stream") && valid_utf8(*data)) {
    content["text"] = std::move(*data);
    if (mime == "application/octet-stream") content["mimeType"] = "text/plain";
  } else {
    content["blob"] = base64_encode(*data);
  }
  return json{{"contents", json::array({content})}};
}

}  // namespace

void register_resource_methods(mcp::Server& server, ToolEnv& env) {
  mcp::MethodSpec read;
  read.async = true;
  read.cacheable = true;  // 2026-07-28 wants ttlMs/cacheScope: private, not to be reused
  read.ttl_ms = 0;
  read.handler = [&env](const json& params, RequestContext& ctx) {
    return read_resource(env, params, ctx);
  };
  server.add_method("resources/read", std::move(read));

  mcp::MethodSpec list;
  list.cacheable = true;
  list.ttl_ms = 0;
  // Files are reached through the template and the links tools return; the
  // one listed resource is the MCP App view of a run, when offered.
  list.handler = [&env](const json&, RequestContext&) {
    json resources = json::array();
    if (!env.config.run_result_view_html.empty())
      resources.push_back({{"uri", kRunResultViewUri},
                           {"name", "run-result"},
                           {"title", "Run result"},
                           {"description",
                            "An MCP App view of an execute_code result: output, errors, images "
                            "and tables."},
                           {"mimeType", kMcpAppMime}});
    return json{{"resources", resources}};
  };
  server.add_method("resources/list", std::move(list));

  mcp::MethodSpec templates;
  templates.cacheable = true;
  templates.ttl_ms = 3'600'000;
  templates.cache_public = true;
  templates.handler = [](const json&, RequestContext&) {
    return json{{"resourceTemplates",
                 json::array({{{"uriTemplate", kSandboxUriTemplate},
                               {"name", "sandbox-file"},
                               {"title", "File in a sandbox"},
                               {"description",
                                "A file in one of your sandboxes; path is relative to /workspace. "
                                "execute_code and execute_command link the files they create with "
                                "these URIs."}}})}};
  };
  server.add_method("resources/templates/list", std::move(templates));
}

}  // namespace sandcastle::tools
