// The server's side of a sandbox's file channel (file_wire.h says why file
// work happens inside the sandbox, and how the bytes travel). One channel per
// sandbox; calls are serialized. The worker is started on demand and leaves
// by itself when idle; a call that finds it gone starts a new one.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/native/file_wire.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::native {

// Sandbox path → path relative to the sandbox root ("" = the root itself).
// Relative paths are taken relative to workdir; ".." and NUL are refused,
// and so are the kernel filesystems named directly (/proc, /dev, /sys: a
// clear answer rather than a confinement — the worker is that).
Result<std::string> sandbox_relative_path(const std::string& path, const std::string& workdir);

struct UsageFigures {
  std::uint64_t disk_bytes = 0;
  std::uint32_t processes = 0;
};

class FileChannel {
 public:
  // Starts a worker and returns the server's end of its channel.
  using Connect = std::function<Result<UniqueFd>()>;
  // How long one call may take before the worker is given up on.
  static constexpr std::chrono::seconds kCallTimeout{60};

  explicit FileChannel(Connect connect) : connect_(std::move(connect)) {}

  // `path` is absolute and normalized (see sandbox_relative_path).
  Result<FileStat> stat(const std::string& path);
  // With options.watch (and recursive), `watch` receives the worker's
  // inotify instance watching the listed tree, when it could make one.
  Result<Listing> list(const std::string& path, const ListOptions& options,
                       UniqueFd* watch = nullptr);
  Result<FileData> read(const std::string& path, const ReadRange& range);
  Status write(const std::string& path, std::string_view data, std::uint32_t mode, bool parents);
  Status mkdir(const std::string& path, bool parents);
  Status remove(const std::string& path, bool recursive);
  // Moves a file (not a directory) to `to`, replacing a file there; a
  // directory at `to` is refused (EISDIR). Both paths as for the others.
  Status rename(const std::string& from, const std::string& to);
  Result<UsageFigures> usage();

  // Closes the channel (the worker sees EOF and exits).
  void close();

 private:
  class Call;
  // Sends req (and data) on a live worker, reusing the current one, or a new
  // one when the current one has gone; `read_reply` reads what follows.
  template <typename T, typename F>
  Result<T> transact(const FileRequest& req, std::string_view data, F&& read_reply);
  // A request whose reply is only a status (write, mkdir, remove).
  Status command(FileOp op, const std::string& path, std::uint32_t flags,
                 std::string_view data = {}, std::uint32_t mode = 0, const std::string& to = {});

  Connect connect_;
  std::mutex mu_;
  UniqueFd conn_;
};

}  // namespace sandcastle::sandbox::native
