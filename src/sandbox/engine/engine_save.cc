// save_sandbox on an engine: the sandbox's /workspace, as a tar taken inside
// the container (its own tar, as the sandbox user), becomes a layer of a new
// engine image built FROM the sandbox's image (POST /build). /workspace is a
// tmpfs in every engine sandbox, which would hide the image's own
// /workspace, so the files go to kWorkspaceSeedDir and a label says so: a
// sandbox made from the image gets them copied into its /workspace.
#include "sandbox/engine/engine_save.h"

#include <string>

#include "common/crypto.h"
#include "sandbox/engine/container_config.h"
#include "sandbox/engine/engine_client.h"
#include "sandbox/engine/engine_sandbox.h"

namespace sandcastle::sandbox::engine {
namespace {

std::string padded(std::string data) {
  data.append((512 - data.size() % 512) % 512, '\0');
  return data;
}

std::string build_context(const std::string& dockerfile, const std::string& workspace_tar) {
  std::string tar = ustar_header("Dockerfile", '0', 0644, dockerfile.size()) + padded(dockerfile);
  tar += ustar_header("workspace.tar", '0', 0644, workspace_tar.size()) + padded(workspace_tar);
  tar.append(1024, '\0');
  return tar;
}

// The engine's images are shared by every tenant's create_sandbox: a name
// it already has is moved only by the owner who made it.
Status name_free(EngineClient& client, const std::string& name, const std::string& label) {
  auto info = client.image_inspect(name);
  if (!info.ok()) {
    if (engine_http_status(info.error()) == 404) return ok_status();
    return info.take_error();
  }
  std::string made_by = "operator";
  if (auto cfg = info->find("Config"); cfg != info->end() && cfg->is_object())
    if (auto lb = cfg->find("Labels"); lb != cfg->end() && lb->is_object())
      made_by = lb->value(kLabelOwner, made_by);
  if (made_by == label) return ok_status();
  return Error::make(ErrorCode::kAlreadyExists,
                     "image name '" + name + "' is taken (made by " +
                         (made_by == "operator"               ? "the operator"
                          : made_by.rfind("session:", 0) == 0 ? "another session"
                                                              : "another key") +
                         "): save under another name");
}

}  // namespace

std::string save_owner_label(const std::string& owner) {
  if (owner.empty()) return "operator";
  const auto colon = owner.find(':');
  const std::string kind = colon == std::string::npos ? "" : owner.substr(0, colon + 1);
  return kind + crypto::hex(crypto::sha256(owner)).substr(0, 32);
}

Result<std::string> save_dockerfile(std::string_view image, std::string_view owner_label) {
  const std::string base = image == "host" ? kHostBaseImage : std::string(image);
  if (base.empty() || base.size() > 512)
    return Error::make(ErrorCode::kInvalidArgument, "save_sandbox: bad image reference (length)");
  for (char c : base) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f)
      return Error::make(ErrorCode::kInvalidArgument,
                         "save_sandbox: the image reference holds a space or control character");
  }
  std::string dockerfile = "FROM " + base + "\nADD workspace.tar " + kWorkspaceSeedDir + "/\n" +
                           "LABEL " + kLabelWorkspaceSeed + "=" + kWorkspaceSeedDir + "\n" +
                           "LABEL " + kLabelOwner + "=" + std::string(owner_label) + "\n";
  if (image == "host") dockerfile += std::string("LABEL ") + kLabelHostRoot + "=1\n";
  return dockerfile;
}

Result<Sandbox::SavedImage> EngineSandbox::save_image(const std::string& name,
                                                      const std::string& owner) {
  if (auto st = check_alive(); !st) return st.take_error();
  // Before anything runs: a refused image leaves nothing behind.
  const std::string label = save_owner_label(owner);
  auto dockerfile = save_dockerfile(spec_.image(), label);
  if (!dockerfile) return dockerfile.take_error();
  if (auto st = name_free(*shared_->client, name, label); !st.ok()) return st.take_error();
  // The tar is bounded by the workspace's size (a tmpfs of the disk limit)
  // plus the archive's own overhead.
  const std::uint64_t limit =
      spec_.limits().disk_bytes + spec_.limits().disk_bytes / 4 + (1u << 20);
  std::string workspace_tar;
  bool too_big = false;
  ExecRequest req;
  req.argv = {"tar", "-cf", "-", "-C", spec_.workdir(), "."};
  req.output.max_bytes = std::size_t{64} * 1024;
  ExecCallbacks cb;
  cb.on_stdout = [&](std::string_view bytes) {
    if (workspace_tar.size() + bytes.size() > limit) {
      too_big = true;
      return;
    }
    workspace_tar.append(bytes);
  };
  auto r = exec(req, cb);
  if (!r) return r.take_error();
  if (too_big)
    return Error::make(
        ErrorCode::kResourceExhausted,
        "save_sandbox: the workspace's tar is larger than " + std::to_string(limit) + " bytes");
  if (r->reason != EndReason::kExited || r->exit_code != 0)
    return Error::make(ErrorCode::kFailedPrecondition,
                       "save_sandbox: tar of " + spec_.workdir() + " in the sandbox failed (exit " +
                           std::to_string(r->status()) + "): " + r->stderr_data.substr(0, 500));
  const std::string context = build_context(*dockerfile, workspace_tar);
  std::size_t at = 0;
  ByteSource src = [&](char* buf, std::size_t cap) -> Result<std::size_t> {
    std::size_t n = std::min(cap, context.size() - at);
    std::copy_n(context.data() + at, n, buf);
    at += n;
    return n;
  };
  auto id = shared_->client->image_build(src, name);
  if (!id) return id.take_error();
  return SavedImage{name, *id, spec_.image(), workspace_tar.size()};
}

}  // namespace sandcastle::sandbox::engine
