// What an engine container of sandcastle's looks like: the Engine API body
// of POST /containers/create for a spec, and the tiny base image that the
// "host" image starts from on a local engine.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sandbox/spec.h"

namespace sandcastle::sandbox::engine {

// Where the agent binary is in every container: a hidden file of the shared
// directory (read-only; publish_shared refuses names with a leading dot, so
// nothing replaces it), so the container's tree gains no other entry.
inline constexpr const char* kAgentInContainer = "/opt/sandcastle/.agent";
inline constexpr const char* kAgentInShare = ".agent";
// The image the "host" image is built on (imported once per engine).
inline constexpr const char* kHostBaseImage = "sandcastle/host-base:2";

struct ContainerPlan {
  std::string image;       // engine image reference (kHostBaseImage for "host")
  bool host_root = false;  // bind the host's /usr and the generated /etc
  std::string etc_dir;     // host_root: the /etc template
  std::string share_dir;   // bound read-only at kSharedDir; holds the agent
  // An engine on another host (not a unix socket): nothing of this host can
  // be bound. kSharedDir is an anonymous volume instead, filled through the
  // archive API before the start (the agent) and by publish_shared.
  bool remote = false;
  std::string user = "1000:1000";
  std::string sandbox_id;
  std::string server_tag;  // label value naming this server (pid@host)
  // Podman's tmpfs takes no uid=/gid= options; its "U" chowns the mount to
  // the container's user instead.
  bool podman = false;
  // An image save_sandbox made: its /workspace files are at this path of
  // the image (a tmpfs hides the image's own /workspace), copied into the
  // sandbox's /workspace when it starts.
  std::string workspace_seed;
};

// Labels save_sandbox puts on an engine image (and plan_for reads back).
inline constexpr const char* kLabelHostRoot = "sandcastle.host-root";
inline constexpr const char* kLabelWorkspaceSeed = "sandcastle.workspace-seed";
// Who made the image's name (save_owner_label): an image without it is the
// operator's.
inline constexpr const char* kLabelOwner = "sandcastle.owner";
inline constexpr const char* kWorkspaceSeedDir = "/.sandcastle-workspace";

// One ustar header (type '0' file, '2' symlink, '5' directory), owner root.
std::string ustar_header(const std::string& name, char type, unsigned mode, std::uint64_t size,
                         const std::string& link = {});

// Every hardening the issue asks for, and Docker's defaults for the rest
// (its seccomp profile, masked /proc paths): CapDrop ALL, no-new-privileges,
// read-only root, no network, tmpfs /tmp and /workspace sized by the spec
// (owned by the sandbox user, exec allowed: compiled programs run there),
// memory (no swap), pids and CPU limits.
nlohmann::json container_config(const SandboxSpec& spec, const ContainerPlan& plan);

// One regular file as a ustar entry (header, data, padding), owned by root,
// for the archive API. `name` shorter than 100 bytes (else kInvalidArgument).
Result<std::string> tar_file_entry(const std::string& name, unsigned mode, std::string_view data);
// The two zero blocks that end a tar.
std::string tar_end();

// A root filesystem tar with only mount points, the merged-/usr symlinks
// (bin, lib, lib64, sbin -> usr/...) and empty /etc, /tmp, /workspace: all
// the "host" image needs below its binds.
std::string host_base_tar();

}  // namespace sandcastle::sandbox::engine
