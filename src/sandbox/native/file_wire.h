// The file channel: how the server asks a sandbox for file work, and how the
// bytes come back.
//
// THE RULE: the server never opens, stats or writes a path inside a sandbox
// with its own credentials. A sandbox controls its tree: any component can be
// a symlink into its own /proc (whose files act for the *opener*: a host-root
// server writing /proc/sys/kernel/core_pattern through it owns the host), a
// FIFO that hangs the caller, or a file swapped between a check and a use. A
// path check on a string, or RESOLVE_IN_ROOT on a root that holds a live
// procfs, is not confinement. So every file operation runs in a worker
// forked by the sandbox's init: in the sandbox's user, mount, pid and network
// namespaces, as the sandbox user, with no capabilities, no_new_privs and the
// sandbox's seccomp filter — nothing it can reach is more than what the
// sandbox's own programs can reach. The worker opens with O_NONBLOCK and
// checks the type on the open fd, so a special file is refused, never read.
//
// The channel is a SOCK_STREAM socketpair (one per sandbox, calls serialized
// by the server). Every message is a u32 length and that many bytes of the
// wire encoding (wire.h); a write's data and a read's bytes follow their
// message raw, so large files stream at memory speed. The worker's replies
// cross a trust boundary: the server bounds every length by what it asked
// for (kMaxFileMessage, the read length, the listing's entry cap).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandcastle::sandbox::native {

// The largest framed message either side accepts (a path is at most 4096
// bytes, an entry's name at most 255 on Linux; margin for the rest).
constexpr std::uint32_t kMaxFileMessage = 16 * 1024;
// Longest path a request may name (PATH_MAX).
constexpr std::size_t kMaxFilePath = 4096;
// Deepest a recursive listing descends (each level is an open directory in
// the worker, bounded by its fd limit too).
constexpr std::uint32_t kMaxListDepth = 64;

enum class FileOp : std::uint32_t {
  kStat = 1,    // path → one entry (not following a final symlink)
  kList = 2,    // path → entries; flags kRecursive; length = max entries
  kRead = 3,    // path, offset, length → size, then up to length raw bytes
  kWrite = 4,   // path, mode, length = bytes that follow; flags kParents
  kMkdir = 5,   // path; flags kParents
  kRemove = 6,  // path; flags kRecursive
  kUsage = 7,   // → size = bytes used on /workspace's filesystem, count = processes
  kRename = 8,  // path → to (renameat2): replaces a file, never a directory (EISDIR)
};

// FileRequest::flags
constexpr std::uint32_t kFileParents = 1;    // write/mkdir: create missing parent directories
constexpr std::uint32_t kFileRecursive = 2;  // list: descend; remove: the whole tree
constexpr std::uint32_t kFileWhole = 4;  // read: refuse (kTooLarge) when the rest exceeds length
// list (recursive): also watch the tree (change_watches.h); the reply's
// header then carries the watch's inotify fd and says so (watching).
constexpr std::uint32_t kFileWatch = 8;
// The most directories one watch covers: more, and the server lists after
// every run as it would without one.
constexpr std::uint32_t kMaxWatchedDirs = 1024;

struct FileRequest {
  FileOp op = FileOp::kStat;
  std::string path;  // absolute, normalized, no ".." (the server checks)
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  std::uint32_t mode = 0644;
  std::uint32_t flags = 0;
  std::string skip;  // list: a name in the listed directory left out
  std::string to;    // rename: the new path (checked as path is); empty for other ops
};

enum class FileStatus : std::uint32_t {
  kOk = 0,
  kErrno = 1,       // err and step say what failed
  kNotRegular = 2,  // step names the type ("FIFO"); nothing was opened for I/O
  kTooLarge = 3,    // kFileWhole read: size is the file's size; no data follows
};

struct FileReply {
  FileStatus status = FileStatus::kOk;
  std::int32_t err = 0;
  std::string step;
  std::uint64_t size = 0;   // read: file size; usage: bytes used
  std::uint64_t count = 0;  // list: entries that follow; read: bytes that follow; usage: processes
  bool truncated = false;   // list: more entries than asked for
  bool watching = false;    // list with kFileWatch: the header carried the watch's fd
};

// One entry of a listing or a stat: `name` is the path relative to the
// listed directory (a plain name unless recursive).
struct FileEntryWire {
  std::string name;
  std::uint32_t type = 0;  // FileType
  std::uint64_t size = 0;
  std::uint32_t mode = 0;
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;
};

std::string encode(const FileRequest& r);
std::optional<FileRequest> decode_file_request(std::string_view bytes);
std::string encode(const FileReply& r);
std::optional<FileReply> decode_file_reply(std::string_view bytes);
std::string encode(const FileEntryWire& e);
std::optional<FileEntryWire> decode_file_entry(std::string_view bytes);

// The u32 length prefix in front of every message.
std::string frame(std::string_view message);

}  // namespace sandcastle::sandbox::native
