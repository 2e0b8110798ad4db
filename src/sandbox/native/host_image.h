// The "host" image: the host's /usr (read-only) under a generated /etc, fresh
// /proc, a minimal /dev and size-limited tmpfs for /tmp and /workspace.
// The /etc template is written once per server start; each sandbox only
// bind-mounts it, so creating a sandbox copies no files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "sandbox/native/wire.h"
#include "sandbox/spec.h"

namespace sandcastle::sandbox::native {

constexpr const char* kRuntimePrefix = "sandcastle-";

struct RuntimeDirs {
  std::string base;          // <tmp>/sandcastle-<pid>
  std::string etc_template;  // base/etc
  std::string root_mount;    // base/root: where each sandbox mounts its root tmpfs
  std::string share;         // base/share: every sandbox's kSharedDir, read-only
  std::string mask;          // base/mask: an empty file and an empty directory
                             // (file, dir), bound over what /proc must hide
};

// Creates the server's runtime directory and the /etc template. The
// directory name carries the server pid so sweep_leftovers() can tell ours
// from a crashed predecessor's.
// `tag` (for a backend other than the native one, e.g. "engine-2") makes
// the directory <tmp>/sandcastle-<pid>-<tag>, so backends of one process
// never share or remove each other's.
Result<RuntimeDirs> prepare_runtime_dirs(const std::string& tag = {});

// Mount plan for the "host" image (paths relative to the new root), in two
// parts: what every sandbox of this server has (binds, /proc, /dev, mount
// points; done ahead of demand by a prespawned init), and what its spec
// sizes (the tmpfs mounts), followed by the read-only remounts of /dev and /.
// /proc is masked and partly read-only as runc's defaults have it
// (kProcMasked, kProcReadOnly).
std::vector<MountOp> host_image_base_plan(const RuntimeDirs& dirs);

// What runc (and so Docker) hides in /proc by default, and what it makes
// read-only; /sys is not mounted in a sandbox at all. Entries this kernel
// lacks are skipped.
inline constexpr const char* kProcMasked[] = {
    "proc/acpi",          "proc/asound",     "proc/interrupts",  "proc/kcore",       "proc/keys",
    "proc/latency_stats", "proc/timer_list", "proc/timer_stats", "proc/sched_debug", "proc/scsi",
};
inline constexpr const char* kProcReadOnly[] = {"proc/bus", "proc/fs", "proc/irq", "proc/sys",
                                                "proc/sysrq-trigger"};
std::vector<MountOp> host_image_spec_plan(const SandboxSpec& spec);
// Both, in order.
std::vector<MountOp> host_image_plan(const SandboxSpec& spec, const RuntimeDirs& dirs);

// The host /etc entries (fnmatch patterns) copied into the template: package
// configuration that toolchains read at start (the JDK's java.security,
// fontconfig's fonts.conf, Debian's python and perl site files, mime.types,
// services). Nothing that holds credentials (shadow, ssh, sudoers, gitconfig,
// maven settings) and nothing from the host's identity (passwd, hosts).
inline constexpr const char* kHostEtcCopied[] = {
    "java-*-openjdk", "fonts",    "python3",   "python3.*", "perl",         "matplotlibrc",
    "mime.types",     "services", "protocols", "rpc",       "locale.alias", "gai.conf",
};

// Copies `src` (a file, a symlink or a directory tree) to `dst`, keeping only
// what every host user may read: world-readable regular files of at most
// 1 MiB, symlinks as they are, world-searchable directories, at most 8 deep.
// `budget` is the bytes of file content still allowed; an entry over it is
// skipped. Other file types are skipped.
Status copy_public_tree(const std::string& src, const std::string& dst, std::uint64_t& budget,
                        int depth = 0);

// Writes base/share/<name> by way of a temporary file and a rename.
Status publish_shared_file(const RuntimeDirs& dirs, const std::string& name, std::string_view data);

// Where runtime dirs live for this user (/run as root, else /tmp).
std::string runtime_parent();

}  // namespace sandcastle::sandbox::native
