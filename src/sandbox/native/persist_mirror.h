// Persistent sandboxes without root (issue 16): the sandbox works on its
// tmpfs /workspace like an ephemeral one, and a copy of that tree on disk
// (<storage dir>/<id>/mirror/workspace) is brought up to date after every
// call that can write, before the call's result is returned; a start copies
// it back. No loop device, no FUSE, no quota: what an unprivileged server has.
//
// The copy is made inside the sandbox's confinement: init forks a worker
// (sandbox uid, no capabilities, no_new_privs, seccomp, not dumpable, so the
// sandbox's processes cannot ptrace it or reach its fds) that gets an fd of
// the on-disk directory, which nothing in the sandbox can reach otherwise.
// Both trees are walked beneath their fds: every open is an openat2 of one
// name with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV and
// O_NOFOLLOW; symlinks are copied as links (never followed), fifos, sockets
// and devices skipped, other mounts not entered.
//
// Cost: a file whose size, mtime (ns) and mode match its copy is not read,
// so an unchanged tree costs one metadata walk of both sides; a changed file
// costs its own bytes (data segments only: holes stay holes). Each changed
// file is written beside its copy and renamed over it, so a kill at any
// point leaves every file whole (old or new). No fsync: what must survive is
// a kill of the server, and the page cache outlives that.
//
// The bound: the copy's file data (each file's data rounded up to 4 KiB)
// never exceeds max_bytes. Entries the source no longer has go first (a
// whole pass), so a move is never copied while its old place still counts;
// then changed files are copied with a running total, the old copy of a
// file dropped first when both would not fit, and at most the size a file
// had when it was opened is read. A source that grows while it is copied
// therefore ends the pass with ENOSPC rather than pushing the copy past the
// bound (no freezer needed, so none is used: it would cost every call).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "sandbox/native/step_error.h"
#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::native {

// strerror's thread-safe form (the server links these files too).
inline const char* mirror_err_text(int err) {
  const char* t = strerrordesc_np(err);
  return t ? t : "unknown error";
}

struct MirrorLimits {
  std::uint64_t max_bytes = 0;  // file data in `to` after (and during) the pass
  std::uint64_t max_entries = 1'000'000;
};

struct MirrorStats {
  int err = 0;                     // 0: `to` now equals `from` as it was walked
  std::string message;             // err != 0: what failed
  std::uint64_t entries = 0;       // in `from`
  std::uint64_t copied_files = 0;  // regular files and symlinks written
  std::uint64_t copied_bytes = 0;  // file data written
  std::uint64_t removed = 0;       // entries of `to` removed
  std::uint64_t skipped = 0;       // fifos, sockets, devices, other mounts, unreadable
  std::uint64_t total_bytes = 0;   // file data in `to` afterwards (4 KiB units)
};

// Makes the tree beneath directory fd `to` equal to the one beneath `from`
// (regular files with their data, mode and mtime; directories; symlinks).
// Plain syscalls and std containers: usable in the init helper.
MirrorStats mirror_tree(int from, int to, const MirrorLimits& limits);

// The copy's staging (`dir`/.sc-mirror) left by a pass that did not end:
// what it had set aside is put back where the tree lacks it, then the
// staging is removed. 0 or an errno. (mirror_tree does it for its `to`.)
int recover_staging(int dir);

// One name beneath directory fd `dir` as every walk here opens it: openat2
// with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV, O_NOFOLLOW.
int mirror_open_beneath(int dir, const char* name, int flags);

// Removes everything beneath directory fd `dir` (not `dir` itself), never
// following a symlink nor leaving dir's filesystem. 0 or an errno.
int clear_tree(int dir);

// The request (ControlKind::kPersistMirror; fds: the reply stream, then the
// on-disk directory, then for kCopy the new storage's directory).
//   kSave / kRestore: the sandbox's tree to the storage, or back.
//   kCopy: one storage's tree into another's (fork_sandbox);
//   kClear: everything beneath the storage's directory removed.
// (The last two run in whatever sandbox the server has at hand, so that no
// walk of a tree a sandbox wrote happens in the server itself.)
//   kAbort (no fds): the running worker, if any, killed (the server gave up
//   on it); init kills a previous worker before forking a new one anyway.
enum class MirrorDirection : std::uint32_t {
  kSave = 1,
  kRestore = 2,
  kCopy = 3,
  kClear = 4,
  kAbort = 5
};
struct PersistMirrorWire {
  MirrorDirection direction = MirrorDirection::kSave;
  std::uint64_t max_bytes = 0;
  std::uint64_t max_entries = 0;
};
std::string encode(const PersistMirrorWire& w);
std::optional<PersistMirrorWire> decode_persist_mirror(std::string_view bytes);

std::string encode(const MirrorStats& s);
std::optional<MirrorStats> decode_mirror_stats(std::string_view bytes);
constexpr std::uint32_t kMaxMirrorReply = 16 * 1024;

// In the worker init forked (init's other fds closed): enters the sandbox's
// context, mirrors /workspace to `store_fd` (kSave) or back (kRestore),
// writes the framed MirrorStats on `sock`, exits.
// rw_fd: init's kept rw/ fd of an image sandbox (its upper dir is what is
// kept), -1 for image "host" (/workspace).
// other_fd: kCopy's target, else -1.
[[noreturn]] void run_persist_mirror(int sock, int store_fd, int other_fd, int rw_fd,
                                     const InitConfig& config, const PersistMirrorWire& w);

// In init, before the overlay is mounted (MountKind::kRestoreMirror): a
// child in the sandbox's context copies the on-disk `src` (a host path the
// server made) into `dst` (the upper dir on the sandbox's tmpfs).
std::optional<StepError> restore_mirror_at_mount(const InitConfig& config, const std::string& src,
                                                 const std::string& dst, std::uint64_t max_bytes);

}  // namespace sandcastle::sandbox::native
