// list_files, read_file, write_file (sandbox files) and upload_file,
// download_file (host <-> sandbox, only below operator-allowed directories).
#include "tools/file_tools.h"

#include <sys/stat.h>

#include "common/base64.h"
#include "common/utf8.h"
#include "mcp/pagination.h"
#include "service/file_listing.h"
#include "service/file_transfer.h"
#include "service/host_paths.h"
#include "service/workspace_diff.h"
#include "tools/adapter.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

// File errors with what to do next, keyed by the errno the engine reports.
ToolResult file_error(const Error& err, const std::string& path) {
  std::string hint;
  switch (err.sys_errno) {
    case ENOENT: hint = "no such file or directory; call list_files to see what exists"; break;
    case EROFS: hint = "that location is read-only; write under /workspace (or /tmp)"; break;
    case EACCES:
    case EPERM:
      hint =
          "permission denied; files outside /workspace and /tmp are not writable by the sandbox "
          "user";
      break;
    case EISDIR: hint = "it is a directory; use list_files, or name a file inside it"; break;
    case ENOTDIR:
      hint = "a component of the path is not a directory; check the path with list_files";
      break;
    case ENOSPC:
      hint =
          "the sandbox's disk is full; delete files or create a sandbox with a larger "
          "limits.disk_mb";
      break;
    case EFBIG: hint = "the file exceeds the sandbox's file size limit"; break;
    default: break;
  }
  // A FIFO, socket, device or directory: the engine's message says which.
  if (err.code == ErrorCode::kFailedPrecondition) {
    if (err.context.find(" is a directory;") != std::string::npos)
      return ToolResult::error(path + " is a directory; use list_files to see what it contains");
    return ToolResult::error(err.context);
  }
  if (err.code == ErrorCode::kInvalidArgument || err.code == ErrorCode::kPermissionDenied)
    hint =
        "paths must stay inside the sandbox: relative to /workspace, or absolute sandbox paths, "
        "without '..'";
  if (hint.empty()) return error_result(err);
  return ToolResult::error(path + ": " + hint + " (" + err.message() + ")");
}

ToolResult list_files(ToolEnv& env, const json& args, RequestContext& ctx) {
  const std::string root = args["path"];
  ListStep failed = ListStep::kSandbox;
  auto listing = service::list_files(env, Caller{owner_of(ctx), {}}, args["sandbox_id"], root,
                                     args["recursive"], &failed);
  if (!listing.ok())
    return failed == ListStep::kPath ? file_error(listing.error(), root)
                                     : error_result(listing.error());
  json files = json::array();
  for (const auto& f : listing->entries)
    files.push_back(json{{"path", f.path},
                         {"name", f.name},
                         {"type", f.type},
                         {"size", f.size},
                         {"mode", f.mode},
                         {"modified", f.modified}});
  size_t n = files.size();
  return ToolResult::from_structured(json{{"path", listing->path},
                                          {"files", std::move(files)},
                                          {"count", n},
                                          {"truncated", listing->truncated}});
}

ToolResult read_file(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  const std::string path = args["path"];
  const uint64_t offset = args["offset"];
  const uint64_t cap = env.config.max_file_bytes;
  const bool ranged = args.contains("length");
  if (ranged && args["length"].get<uint64_t>() > cap)
    return ToolResult::error(
        "length is above the " + std::to_string(cap) +
        "-byte limit of one read; read the file in parts of at most that many bytes");
  // Without a length the whole rest of the file is asked for, and refused
  // unread when it is above the cap: the sandbox never makes us hold more.
  auto read = read_bounded(
      use->sandbox(), *env.config.transfer_budget, path, offset,
      ranged ? std::optional<uint64_t>(args["length"].get<uint64_t>()) : std::nullopt, cap,
      kMcpReplyCopies);
  if (!read.ok()) return file_error(read.error(), path);
  ctx.keep_until_answered(std::make_shared<ByteBudget::Lease>(std::move(read->lease)));
  auto* data = &read->file;
  if (data->too_large)
    return ToolResult::error(path + " is " + std::to_string(data->size) +
                             " bytes; one read returns at most " + std::to_string(cap) +
                             " bytes: read it in parts with offset and length");
  std::string part = std::move(data->data);
  const std::string encoding = args["encoding"];
  const bool eof = offset + part.size() >= data->size;
  json out{{"path", path},
           {"size", data->size},
           {"offset", offset},
           {"length", part.size()},
           {"encoding", encoding},
           {"mime_type", mime_type_for(path)},
           {"eof", eof}};
  if (!eof) out["next_offset"] = offset + part.size();
  if (encoding == "base64") {
    out["content"] = base64_encode(part);
  } else {
    if (!valid_utf8(part))
      return ToolResult::error(
          path +
          " is not valid UTF-8 text (binary data?); call read_file with encoding \"base64\"");
    out["content"] = part;
  }
  return ToolResult::from_structured(out);
}

ToolResult write_file(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  const std::string path = args["path"];
  auto lease = reserve_transfer(*env.config.transfer_budget,
                                args["content"].get_ref<const std::string&>().size());
  if (!lease.ok()) return error_result(lease.error());
  std::string data;
  if (args["encoding"] == "base64") {
    auto decoded = base64_decode(args["content"].get_ref<const std::string&>());
    if (!decoded)
      return ToolResult::error(
          "content is not valid base64; send the bytes base64-encoded or use encoding \"text\"");
    data = std::move(*decoded);
  } else {
    data = args["content"].get<std::string>();
  }
  if (data.size() > env.config.max_file_bytes)
    return ToolResult::error(
        "content is " + std::to_string(data.size()) + " bytes, more than the " +
        std::to_string(env.config.max_file_bytes) +
        "-byte limit of one write; split the file or generate it inside the sandbox");
  if (auto s = use->sandbox().write_file(path, data, args["executable"].get<bool>() ? 0755 : 0644,
                                         /*parents=*/true);
      !s.ok())
    return file_error(s.error(), path);
  return ToolResult::from_structured(
      json{{"path", path}, {"size", data.size()}, {"written", true}});
}

ToolResult upload_file(ToolEnv& env, const HostPaths& host, const json& args, RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  const std::string source = args["source_path"];
  auto fd = host.open_read(source);
  if (!fd.ok()) return error_result(fd.error());
  struct stat hst {};
  if (::fstat(fd->get(), &hst) != 0)
    return error_result(Error::from_errno("stat host file " + source));
  auto lease = reserve_transfer(
      *env.config.transfer_budget,
      std::min<uint64_t>(static_cast<uint64_t>(hst.st_size), env.config.max_file_bytes));
  if (!lease.ok()) return error_result(lease.error());
  auto data = read_all(fd->get(), env.config.max_file_bytes, "host file " + source);
  if (!data.ok()) return error_result(data.error());
  std::string dest = args.value("dest_path", std::string());
  if (dest.empty()) dest = source.substr(source.rfind('/') + 1);
  if (auto s = use->sandbox().write_file(dest, *data, 0644, /*parents=*/true); !s.ok())
    return file_error(s.error(), dest);
  return ToolResult::from_structured(
      json{{"source_path", source}, {"dest_path", dest}, {"size", data->size()}});
}

ToolResult download_file(ToolEnv& env, const HostPaths& host, const json& args,
                         RequestContext& ctx) {
  auto e = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!e.ok()) return error_result(e.error());
  EntryUse use(*e);
  const std::string path = args["path"];
  const uint64_t cap = env.config.max_file_bytes;
  auto read = read_bounded(use->sandbox(), *env.config.transfer_budget, path, 0, std::nullopt, cap, 1);
  if (!read.ok()) return file_error(read.error(), path);
  auto* data = &read->file;
  if (data->too_large)
    return ToolResult::error(
        path + " is " + std::to_string(data->size) + " bytes, above the " + std::to_string(cap) +
        "-byte limit of one transfer; split it inside the sandbox (e.g. with split) first");
  const std::string dest = args["dest_path"];
  auto fd = host.open_write(dest);
  if (!fd.ok()) return error_result(fd.error());
  if (auto s = write_all(fd->get(), data->data, "host file " + dest); !s.ok())
    return error_result(s.error());
  return ToolResult::from_structured(
      json{{"path", path}, {"dest_path", dest}, {"size", data->data.size()}});
}

json sandbox_id_property() {
  return json{{"type", "string"}, {"description", "Sandbox id or name."}};
}

json path_schema(const std::string& what) {
  return json{{"type", "string"},
              {"minLength", 1},
              {"description", what + " inside the sandbox: relative to /workspace, or absolute."}};
}

}  // namespace

ToolResult file_ops::list(ToolEnv& env, const json& args, RequestContext& ctx) {
  return list_files(env, args, ctx);
}
ToolResult file_ops::read(ToolEnv& env, const json& args, RequestContext& ctx) {
  return read_file(env, args, ctx);
}
ToolResult file_ops::write(ToolEnv& env, const json& args, RequestContext& ctx) {
  return write_file(env, args, ctx);
}

void register_file_tools(mcp::Server& server, ToolEnv& env) {
  auto& tools = server.tools();
  const json read_only = read_only_hints();
  const json writes = hints(false, true, true);
  tools.add({"list_files", "List files",
             "Lists files and directories in a sandbox (type, size, mode, modification time).",
             json{{"type", "object"},
                  {"properties",
                   {{"sandbox_id", sandbox_id_property()},
                    {"path",
                     {{"type", "string"},
                      {"default", "/workspace"},
                      {"description", "Directory to list (default /workspace)."}}},
                    {"recursive", {{"type", "boolean"}, {"default", false}}}}},
                  {"required", {"sandbox_id"}},
                  {"additionalProperties", false}},
             json{{"type", "object"},
                  {"properties", {{"files", {{"type", "array"}}}}},
                  {"required", {"files"}}},
             read_only, nullptr},
            [&env](const json& a, RequestContext& c) { return list_files(env, a, c); });
  tools.add(
      {"read_file", "Read file",
       "Reads a file from a sandbox. Text comes back as is; use encoding \"base64\" for binary "
       "files, and offset/length to read a large file in parts.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", sandbox_id_property()},
              {"path", path_schema("File")},
              {"encoding", {{"type", "string"}, {"enum", {"text", "base64"}}, {"default", "text"}}},
              {"offset", {{"type", "integer"}, {"minimum", 0}, {"default", 0}}},
              {"length", {{"type", "integer"}, {"minimum", 0}}}}},
            {"required", {"sandbox_id", "path"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"content", {{"type", "string"}}}}},
            {"required", {"content", "path", "size"}}},
       read_only, nullptr},
      [&env](const json& a, RequestContext& c) { return read_file(env, a, c); });
  tools.add(
      {"write_file", "Write file",
       "Writes a file in a sandbox, creating parent directories. Content is text, or base64 "
       "with encoding \"base64\" for binary data; executable makes it runnable.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", sandbox_id_property()},
              {"path", path_schema("File")},
              {"content", {{"type", "string"}}},
              {"encoding", {{"type", "string"}, {"enum", {"text", "base64"}}, {"default", "text"}}},
              {"executable", {{"type", "boolean"}, {"default", false}}}}},
            {"required", {"sandbox_id", "path", "content"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}},
            {"required", {"path", "size"}}},
       writes, nullptr},
      [&env](const json& a, RequestContext& c) { return write_file(env, a, c); });

  auto host = std::make_shared<HostPaths>(env.config.allowed_host_paths);
  std::string allowed =
      host->allowed().empty() ? std::string("none (enable with --allow-host-path DIR)") : "";
  for (const auto& d : host->allowed()) allowed += (allowed.empty() ? "" : ", ") + d;
  tools.add(
      {"upload_file", "Upload host file",
       "Copies a file from the host machine into a sandbox. Only files below the directories "
       "the operator allowed are readable; allowed now: " +
           allowed + ".",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", sandbox_id_property()},
              {"source_path",
               {{"type", "string"}, {"minLength", 1}, {"description", "Absolute host path."}}},
              {"dest_path", path_schema("Destination (default: the file name in /workspace)")}}},
            {"required", {"sandbox_id", "source_path"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"dest_path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}},
            {"required", {"dest_path", "size"}}},
       writes, nullptr},
      [&env, host](const json& a, RequestContext& c) { return upload_file(env, *host, a, c); });
  tools.add(
      {"download_file", "Download file to host",
       "Copies a file from a sandbox to the host machine, only below the directories the "
       "operator allowed; allowed now: " +
           allowed + ".",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", sandbox_id_property()},
              {"path", path_schema("File")},
              {"dest_path",
               {{"type", "string"},
                {"minLength", 1},
                {"description", "Absolute host path to write."}}}}},
            {"required", {"sandbox_id", "path", "dest_path"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties", {{"dest_path", {{"type", "string"}}}, {"size", {{"type", "integer"}}}}},
            {"required", {"dest_path", "size"}}},
       hints(false, true, true, true), nullptr},
      [&env, host](const json& a, RequestContext& c) { return download_file(env, *host, a, c); });
}

}  // namespace sandcastle::tools
