// export_dockerfile: a Dockerfile and a build context (tar.gz) that rebuild a
// sandbox's session elsewhere: FROM its base image, the pip/npm packages the
// session installed pinned to the versions the installers recorded, its
// /workspace files, its env and workdir. Everything is read through the
// sandbox's file API (done inside the sandbox, never on host paths) and
// treated as hostile: records are bounded and validated (service/dockerfile.h),
// the context is bounded by the file tools' limit (max_file_bytes). The two files are written into
// the sandbox (/workspace/.sandcastle/export/N/) and linked like any other
// sandbox file (sandbox:// resource, HTTP file link).
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <memory>
#include <regex>

#include "service/dockerfile.h"
#include "service/file_transfer.h"
#include "service/workspace_diff.h"
#include "tools/adapter.h"
#include "tools/resource_methods.h"
#include "tools/tool_env.h"

namespace sandcastle::tools {

using mcp::json;
using mcp::RequestContext;
using mcp::ToolResult;

namespace {

constexpr const char* kWorkspace = "/workspace";
constexpr const char* kExportDir = "/workspace/.sandcastle/export";
constexpr std::size_t kMaxDistInfos = 2000;
constexpr std::size_t kMaxNpmPackages = 2000;
std::atomic<uint64_t> g_export_counter{0};

Error too_large(std::uint64_t limit) {
  return Error::make(ErrorCode::kResourceExhausted,
                     "the workspace's files are more than the build context's limit of " +
                         std::to_string(limit >> 20) +
                         " MiB (the file tools' limit): remove large files from /workspace, or "
                         "keep the session with save_sandbox");
}

// The release the host runs, as an image reference (image "host" sandboxes
// ran on the host's /usr). Read from the host, not from a sandbox.
std::string host_base_ref() {
  UniqueFd fd(::open("/etc/os-release", O_RDONLY | O_CLOEXEC));
  if (!fd) fd = UniqueFd(::open("/usr/lib/os-release", O_RDONLY | O_CLOEXEC));
  std::string text(16384, '\0');
  ssize_t n = fd ? ::read(fd.get(), text.data(), text.size()) : -1;
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return base_ref_from_os_release(text);
}

// An index URL as a build-arg default: only plain URLs without credentials
// (a user:password@ would end up in the image's history).
std::string safe_index_default(const std::string& url) {
  static const std::regex kUrl(R"(^https?://[A-Za-z0-9._~:/?#\[\]!&'()*+,;=%-]+$)");
  if (url.size() > 1024 || url.find('@') != std::string::npos || !std::regex_match(url, kUrl))
    return {};
  return url;
}

struct Collected {
  std::vector<PinnedPackage> pip, npm;
  json refused = json::array();  // installer records left out, and why
};

Result<std::string> read_record(sandbox::Sandbox& sb, const std::string& path) {
  auto r = sb.read_file(path, sandbox::ReadRange{0, kMaxRecordBytes, true});
  if (!r.ok()) return r.error();
  if (r->too_large)
    return Error::make(ErrorCode::kInvalidArgument,
                       "larger than " + std::to_string(kMaxRecordBytes >> 10) + " KiB");
  return std::move(r->data);
}

void collect_pip(sandbox::Sandbox& sb, Collected& c) {
  sandbox::ListOptions opts;
  opts.max_entries = kMaxDistInfos * 8;
  auto listing = sb.list(kPythonPackages, opts);
  if (!listing.ok()) return;  // nothing installed with pip
  const std::string suffix = ".dist-info";
  for (const auto& e : listing->entries) {
    if (e.type != sandbox::FileType::kDirectory || e.name.size() <= suffix.size() ||
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string path = std::string(kPythonPackages) + "/" + e.name + "/METADATA";
    if (c.pip.size() + c.refused.size() >= kMaxDistInfos) {
      c.refused.push_back(
          {{"record", path},
           {"reason", "more than " + std::to_string(kMaxDistInfos) + " dist-info directories"}});
      break;
    }
    auto text = read_record(sb, path);
    if (!text.ok()) {
      c.refused.push_back({{"record", path}, {"reason", text.error().message()}});
      continue;
    }
    auto p = parse_dist_metadata(*text);
    if (!p.ok()) {
      c.refused.push_back({{"record", path}, {"reason", p.error().context}});
      continue;
    }
    c.pip.push_back(*p);
  }
  if (listing->truncated)
    c.refused.push_back({{"record", kPythonPackages}, {"reason", "too many entries to list"}});
}

void collect_npm(sandbox::Sandbox& sb, Collected& c) {
  const std::string manifest = std::string(kNodePackages) + "/package.json";
  auto text = read_record(sb, manifest);
  if (!text.ok()) {
    if (text.error().code != ErrorCode::kNotFound && text.error().sys_errno != ENOENT)
      c.refused.push_back({{"record", manifest}, {"reason", text.error().message()}});
    return;
  }
  auto names = parse_npm_dependencies(*text);
  if (!names.ok()) {
    c.refused.push_back({{"record", manifest}, {"reason", names.error().context}});
    return;
  }
  for (const auto& name : *names) {
    if (c.npm.size() >= kMaxNpmPackages) break;
    // The name passed valid_npm_name: no '..', at most one '/' (the scope).
    const std::string path = std::string(kNodePackages) + "/node_modules/" + name + "/package.json";
    auto installed = read_record(sb, path);
    if (!installed.ok()) {
      c.refused.push_back({{"record", path}, {"reason", installed.error().message()}});
      continue;
    }
    auto version = parse_npm_installed_version(*installed, name);
    if (!version.ok()) {
      c.refused.push_back({{"record", path}, {"reason", version.error().context}});
      continue;
    }
    c.npm.push_back({name, *version});
  }
}

// A tar.gz built in memory with libarchive.
class TarGz {
 public:
  explicit TarGz(std::uint64_t cap) : cap_(cap), a_(archive_write_new(), archive_write_free) {}
  Status open() {
    if (!a_ || archive_write_add_filter_gzip(a_.get()) != ARCHIVE_OK ||
        archive_write_set_format_pax_restricted(a_.get()) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a_.get(), 1) != ARCHIVE_OK ||
        archive_write_open(a_.get(), this, nullptr, &TarGz::on_write, nullptr) != ARCHIVE_OK)
      return failed("open");
    return {};
  }
  Status add(const std::string& path, bool dir, std::uint32_t mode, std::int64_t mtime,
             std::string_view data = {}) {
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> e(archive_entry_new(),
                                                               archive_entry_free);
    archive_entry_set_pathname_utf8(e.get(), path.c_str());
    archive_entry_set_filetype(e.get(), dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e.get(), mode & 07777 & ~06000);  // never setuid/setgid
    archive_entry_set_size(e.get(), dir ? 0 : static_cast<la_int64_t>(data.size()));
    archive_entry_set_mtime(e.get(), mtime, 0);
    archive_entry_set_uid(e.get(), 0);
    archive_entry_set_gid(e.get(), 0);
    if (archive_write_header(a_.get(), e.get()) != ARCHIVE_OK) return failed(path);
    if (!data.empty() && archive_write_data(a_.get(), data.data(), data.size()) !=
                             static_cast<la_ssize_t>(data.size()))
      return failed(path);
    return {};
  }
  Result<std::string> finish() {
    if (archive_write_close(a_.get()) != ARCHIVE_OK) return failed("close");
    return std::move(out_);
  }

 private:
  static la_ssize_t on_write(struct archive* a, void* self, const void* buf, size_t n) {
    auto* t = static_cast<TarGz*>(self);
    if (t->out_.size() + n > t->cap_) {
      archive_set_error(a, EFBIG, "the build context archive is over its limit");
      return -1;
    }
    t->out_.append(static_cast<const char*>(buf), n);
    return static_cast<la_ssize_t>(n);
  }
  Error failed(const std::string& what) {
    const char* msg = archive_error_string(a_.get());
    return Error::make(ErrorCode::kIo,
                       "build context archive (" + what + "): " + (msg ? msg : "libarchive error"));
  }
  std::uint64_t cap_;
  std::unique_ptr<struct archive, int (*)(struct archive*)> a_;
  std::string out_;
};

struct ContextStats {
  std::uint64_t files = 0, directories = 0, bytes = 0;
  json skipped = json::array();
  ByteBudget::Lease lease;
};

// /workspace's files (.sandcastle/ left out: packages are rebuilt by the
// Dockerfile) into the archive under workspace/, bounded by `limit` bytes.
Status add_workspace(sandbox::Sandbox& sb, ByteBudget& budget, TarGz& tar, std::uint64_t limit,
                     std::size_t max_entries, ContextStats& st) {
  sandbox::ListOptions opts;
  opts.recursive = true;
  opts.max_entries = max_entries;
  opts.skip = ".sandcastle";
  auto listing = sb.list(kWorkspace, opts);
  if (!listing.ok()) return listing.error();
  if (listing->truncated)
    return Error::make(ErrorCode::kResourceExhausted,
                       "/workspace has more than " + std::to_string(max_entries) +
                           " entries, more than a build context may hold");
  std::uint64_t claimed = 0;
  for (const auto& e : listing->entries)
    if (e.type == sandbox::FileType::kRegular) claimed += e.size;
  if (claimed > limit) return too_large(limit);
  // The files' bytes and the archive are held together: reserve both from
  // the server-wide budget (sized from the listing; reads past it refused).
  auto lease = reserve_transfer(budget, claimed, 2);
  if (!lease.ok()) return lease.error();
  st.lease = std::move(*lease);
  for (const auto& e : listing->entries) {
    const std::string in_tar = std::string(kContextWorkspaceDir) + "/" + e.name;
    if (e.type == sandbox::FileType::kDirectory) {
      if (auto s = tar.add(in_tar, true, e.mode | 0700, e.mtime_sec); !s.ok()) return s;
      ++st.directories;
    } else if (e.type == sandbox::FileType::kRegular) {
      // Read whole or not at all: files that grew past what the listing
      // claimed (and the budget holds) are refused unread.
      auto r = sb.read_file(std::string(kWorkspace) + "/" + e.name,
                            sandbox::ReadRange{0, claimed - st.bytes, true});
      if (!r.ok()) {
        st.skipped.push_back({{"path", e.name}, {"reason", r.error().message()}});
        continue;
      }
      if (r->too_large)
        return Error::make(ErrorCode::kFailedPrecondition,
                           "/workspace's files grew while the export read them; export again "
                           "once they are written");
      if (auto s = tar.add(in_tar, false, e.mode, e.mtime_sec, r->data); !s.ok()) return s;
      st.bytes += r->data.size();
      ++st.files;
    } else {
      st.skipped.push_back(
          {{"path", e.name},
           {"reason", e.type == sandbox::FileType::kSymlink
                          ? "a symlink (not followed; recreate it in the Dockerfile)"
                          : "not a regular file"}});
    }
  }
  return {};
}

json file_ref(const ToolEnv& env, const SandboxEntry& e, const std::string& abs_path,
              std::uint64_t size) {
  const std::string rel = abs_path.substr(std::string(kWorkspace).size() + 1);
  json j{{"path", abs_path}, {"uri", sandbox_resource_uri(e.id(), rel)}, {"size", size}};
  if (env.config.file_link) j["url"] = env.config.file_link(e.owner(), e.id(), rel);
  return j;
}

// The execute_command commands of the sandbox's run history, oldest first
// (the newest kMaxCommands; pages of the history, newest first, bounded).
std::vector<std::string> session_commands(ToolEnv& env, const std::string& id) {
  std::vector<std::string> newest_first;
  if (!env.store) return newest_first;
  std::optional<std::int64_t> before;
  for (int page = 0; page < 20 && newest_first.size() < kMaxCommands; ++page) {
    auto h = env.store->history(id, 200, before);
    for (const auto& e : h.entries)
      if (e.tool == "execute_command" && newest_first.size() < kMaxCommands)
        newest_first.push_back(e.input);
    if (!h.next_before) break;
    before = h.next_before;
  }
  return {newest_first.rbegin(), newest_first.rend()};
}

}  // namespace

ToolResult export_dockerfile(ToolEnv& env, const json& args, RequestContext& ctx) {
  auto got = env.manager.get(args["sandbox_id"], owner_of(ctx));
  if (!got.ok()) return error_result(got.error());
  EntryUse use(*got);
  sandbox::Sandbox& sb = use->sandbox();
  const sandbox::SandboxSpec& spec = use->spec();

  DockerfilePlan plan;
  plan.sandbox_id = use->id();
  plan.language = use->language();
  plan.workdir = spec.workdir();
  plan.python_target = kPythonPackages;
  plan.node_prefix = kNodePackages;
  plan.pip_index_url = safe_index_default(env.config.pip_index_url);
  plan.npm_registry = safe_index_default(env.config.npm_registry);
  if (spec.image() == "host") {
    plan.host_userland = true;
    plan.base_ref = host_base_ref();
    if (plan.base_ref.empty())
      return ToolResult::error(
          "the host's release (/etc/os-release ID and VERSION_CODENAME) gives no "
          "image reference for FROM");
  } else {
    plan.base_ref = spec.image();
    if (!valid_image_ref(plan.base_ref))
      return ToolResult::error("the sandbox's image name '" + spec.image() +
                               "' is not an image reference a Dockerfile's FROM takes");
  }
  // The spec's env, but not the operator's pass-through variables (the
  // server's own settings, often credentials: never written into an image).
  json left_out_env = json::array();
  for (const auto& [k, v] : spec.env()) {
    auto pass = env.config.pass_through_env.find(k);
    if (pass != env.config.pass_through_env.end() && pass->second == v) {
      left_out_env.push_back({{"name", k}, {"reason", "the server's pass-through environment"}});
      continue;
    }
    if (!sandbox::valid_env_name(k) || !dockerfile_env_value(v).ok()) {
      left_out_env.push_back({{"name", k}, {"reason", "has a control character"}});
      continue;
    }
    plan.env[k] = v;
  }

  Collected c;
  collect_pip(sb, c);
  collect_npm(sb, c);
  plan.pip = c.pip;
  plan.npm = c.npm;

  const std::uint64_t limit = env.config.max_file_bytes;
  TarGz tar(limit + (limit >> 2) + (std::uint64_t{1} << 20));
  if (auto s = tar.open(); !s.ok()) return error_result(s.error());
  ContextStats st;
  if (auto s = add_workspace(sb, *env.config.transfer_budget, tar, limit,
                             env.config.max_listed_files, st);
      !s.ok())
    return error_result(s.error());
  plan.has_files = st.files + st.directories > 0;
  plan.commands = session_commands(env, use->id());

  auto dockerfile = render_dockerfile(plan);
  if (!dockerfile.ok()) return error_result(dockerfile.error());
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  if (auto s = tar.add("Dockerfile", false, 0644, now, *dockerfile); !s.ok())
    return error_result(s.error());
  if (!plan.npm.empty()) {
    if (auto s = tar.add("sandcastle-npm", true, 0755, now); !s.ok())
      return error_result(s.error());
    if (auto s = tar.add(kContextNpmManifest, false, 0644, now, npm_manifest(plan.npm)); !s.ok())
      return error_result(s.error());
  }
  auto archive = tar.finish();
  if (!archive.ok()) return error_result(archive.error());

  const std::string dir = std::string(kExportDir) + "/" + std::to_string(++g_export_counter);
  const std::string df_path = dir + "/Dockerfile", ctx_path = dir + "/context.tar.gz";
  if (auto s = sb.write_file(df_path, *dockerfile, 0644, true); !s.ok())
    return error_result(s.error());
  if (auto s = sb.write_file(ctx_path, *archive, 0644, true); !s.ok())
    return error_result(s.error());

  json pip = json::array(), npm = json::array();
  for (const auto& p : plan.pip) pip.push_back({{"name", p.name}, {"version", p.version}});
  for (const auto& p : plan.npm) npm.push_back({{"name", p.name}, {"version", p.version}});
  json out{{"dockerfile", *dockerfile},
           {"base_image", plan.base_ref},
           {"host_userland", plan.host_userland},
           {"packages", {{"pip", pip}, {"npm", npm}}},
           {"files", st.files},
           {"directories", st.directories},
           {"context_bytes", st.bytes},
           {"dockerfile_file", file_ref(env, *use, df_path, dockerfile->size())},
           {"context", file_ref(env, *use, ctx_path, archive->size())},
           {"refused", c.refused},
           {"skipped", st.skipped},
           {"left_out_env", left_out_env},
           {"build", "mkdir ctx && tar -xzf context.tar.gz -C ctx && podman build -t NAME ctx"}};
  ToolResult res = ToolResult::from_structured(out);
  res.content.push_back({{"type", "text"}, {"text", *dockerfile}});
  if (ctx.protocol_version() >= "2025-06-18") {
    for (const char* key : {"dockerfile_file", "context"}) {
      const json& f = out[key];
      res.content.push_back({{"type", "resource_link"},
                             {"uri", f["uri"]},
                             {"name", f["path"]},
                             {"mimeType", mime_type_for(f["path"].get<std::string>())},
                             {"size", f["size"]}});
    }
  }
  return res;
}

void register_export_tools(mcp::Server& server, ToolEnv& env) {
  server.tools().add(
      {"export_dockerfile", "Export a Dockerfile",
       "Writes a Dockerfile and a build context (tar.gz) that rebuild this sandbox's session with "
       "docker or podman build: FROM the sandbox's base image (for image \"host\", the Debian "
       "release the host runs), the pip and npm packages installed in the session pinned to their "
       "installed versions, the files in /workspace, and the sandbox's env and workdir. Both are "
       "saved in the sandbox (/workspace/.sandcastle/export/N/) and returned as links; the "
       "Dockerfile is also returned inline. Unpack the context and build it: the Dockerfile is "
       "at its root.",
       json{{"type", "object"},
            {"properties",
             {{"sandbox_id", {{"type", "string"}, {"description", "Sandbox id or name."}}}}},
            {"required", {"sandbox_id"}},
            {"additionalProperties", false}},
       json{{"type", "object"},
            {"properties",
             {{"dockerfile", {{"type", "string"}}},
              {"base_image", {{"type", "string"}}},
              {"host_userland", {{"type", "boolean"}}},
              {"packages", {{"type", "object"}}},
              {"files", {{"type", "integer"}}},
              {"directories", {{"type", "integer"}}},
              {"context_bytes", {{"type", "integer"}}},
              {"dockerfile_file", {{"type", "object"}}},
              {"context", {{"type", "object"}}},
              {"refused", {{"type", "array"}}},
              {"skipped", {{"type", "array"}}},
              {"left_out_env", {{"type", "array"}}},
              {"build", {{"type", "string"}}}}},
            {"required", {"dockerfile", "base_image", "packages", "dockerfile_file", "context"}}},
       hints(false, false, true), nullptr},
      [&env](const json& args, RequestContext& ctx) { return export_dockerfile(env, args, ctx); });
}

}  // namespace sandcastle::tools
