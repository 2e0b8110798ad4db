// The engine-neutral sandbox interface. The native backend implements it with
// namespaces; a Podman/Docker backend can implement the same calls with
// `exec`, `cp` and `rm -f`.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/cancel_token.h"
#include "common/result.h"
#include "common/unique_fd.h"
#include "net/proxy_service.h"
#include "sandbox/spec.h"

namespace sandcastle::sandbox {

// Shared by the caller and a running exec (common/cancel_token.h): cancel()
// ends the exec and its whole process tree (the result says kCancelled),
// interrupt() sends SIGINT to its main process. A backend's exec sets the
// token's channel while it runs.
using CancelToken = sandcastle::CancelToken;

// A sandbox's network namespace and its owning user namespace (nsfs fds).
struct NetNamespaces {
  UniqueFd netns{};
  UniqueFd userns{};
};

// Where every sandbox sees the files its server publishes (publish_shared):
// read-only, the same bytes for all, so a file that every sandbox needs (a
// kernel driver) costs its memory once instead of once per sandbox.
inline constexpr const char* kSharedDir = "/opt/sandcastle";

struct OutputCap {
  // Bytes kept per stream; half from the head, half from the tail.
  std::size_t max_bytes = std::size_t{1024} * 1024;
};

struct ExecRequest {
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // layered over base env and spec env
  std::string cwd;                          // empty = spec workdir
  std::string stdin_data;
  std::optional<std::chrono::milliseconds> timeout;  // empty = spec default
  OutputCap output{};
  // A descriptor of the caller's that the command gets as its fd 3 (-1:
  // none), e.g. one end of a socketpair to talk to the server over. The
  // caller keeps its copy and may close it once the command has started.
  int pass_fd = -1;
  // Nonzero: the command runs in a network namespace of its own (only `lo`,
  // no route anywhere) that holds a TCP listener on 127.0.0.1:<this port>,
  // handed to ExecCallbacks::on_listener before the command starts. Nothing
  // else in the sandbox can reach it: the package installer's proxy
  // is served on it. Backends without the ability refuse (kUnavailable).
  std::uint16_t private_listener_port = 0;
  // False: the spec's env is left out (only the base environment and `env`),
  // for a command the sandbox's own configuration must not steer — the
  // installer, which LD_PRELOAD or NODE_OPTIONS would otherwise hand over.
  bool spec_env = true;
  // True: the command stands for a simple command bash would have run (see
  // tools/simple_command.h): it also gets the variables bash gives such a
  // program, PWD (the working directory), SHLVL=0 and _ (the program's path).
  bool shell_env = false;
  // True: the sandbox runs nothing after this (a one-shot's only command):
  // a backend need not get ready for a next one.
  bool last = false;
};

// A command a warm sandbox starts before any exec asks for it (an
// interpreter, loaded and waiting), so that the exec it is made for costs a
// message rather than the command's start-up. The started command is
// base.argv followed by `loader`. It is handed the one exec that is the
// sandbox's last (ExecRequest::last: a one-shot's, in a sandbox nothing
// else ran in that could change what the command read at its start), whose
// argv is base.argv followed by exactly one more word and whose every other
// field (env, cwd, limits) equals base's and passes no fd; any other exec
// gets a fresh process, as without it.
// The handing over: the started command's fd 3 is a SOCK_SEQPACKET socket,
// on which one message comes: that last word, with the exec's stdin,
// stdout and stderr as SCM_RIGHTS. EOF instead means it is not wanted: it
// exits. Until then its fds 0-2 are a pipe of its own. It was started before
// the sandbox was handed out, so it changes to its working directory again
// by name (a persistent sandbox's disk is mounted over /workspace then).
struct AheadCommand {
  ExecRequest base;
  std::vector<std::string> loader;
  bool operator==(const AheadCommand& o) const {
    return base.argv == o.base.argv && base.env == o.base.env && base.cwd == o.base.cwd &&
           base.spec_env == o.base.spec_env && loader == o.loader;
  }
};

enum class EndReason { kExited, kTimeout, kOutOfMemory, kKilled, kCancelled };
const char* end_reason_name(EndReason r);

struct ExecResult {
  EndReason reason = EndReason::kExited;
  int exit_code = -1;  // valid when the main process exited
  int signal = 0;      // valid when it was killed by a signal
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::uint64_t stdout_total = 0;  // bytes produced, including dropped ones
  std::uint64_t stderr_total = 0;
  std::chrono::microseconds duration{0};
  std::chrono::microseconds cpu_time{0};
  std::uint64_t peak_memory_bytes = 0;
  // Shell-style status: exit code, or 128+signal.
  int status() const { return signal ? 128 + signal : exit_code; }
};

struct ExecCallbacks {
  // Called from the exec's calling thread as output arrives (not capped).
  std::function<void(std::string_view)> on_stdout;
  std::function<void(std::string_view)> on_stderr;
  // With ExecRequest::private_listener_port: the listening socket, once, on
  // the calling thread, before the command starts (connections it makes
  // early wait in the backlog). Required with that option.
  std::function<void(UniqueFd)> on_listener;
};

enum class FileType { kRegular, kDirectory, kSymlink, kOther };

struct FileStat {
  std::string name;  // in a listing: the path relative to the listed directory
  FileType type = FileType::kOther;
  std::uint64_t size = 0;
  std::uint32_t mode = 0;  // permission bits
  std::int64_t mtime_sec = 0;
  std::int64_t mtime_nsec = 0;  // a rewrite within the same second still differs
};

// What a listing may return: at most max_entries (then truncated is set), no
// deeper than the backend's depth limit when recursive. Symlinks are listed,
// never followed.
struct ListOptions {
  bool recursive = false;
  std::size_t max_entries = 10'000;
  std::string skip;  // a name in the listed directory left out (and not descended into)
  // Recursive only: also watch the tree, where the backend can, so that
  // Sandbox::changed_since() can tell whether it changed since.
  bool watch = false;
};

struct Listing {
  std::vector<FileStat> entries;
  bool truncated = false;
  std::uint64_t watch = 0;  // the watch's id for changed_since(); 0: none
};

// A name a listing may hold: a relative path of real components (none
// empty, ".", ".." or over 255 bytes), at most 4096 bytes, no NUL, so a
// caller that joins it to the listed directory stays below it. Listings come
// from inside a sandbox: every name is checked with this before it is used.
bool valid_listed_name(std::string_view name);

// A range of a file: at most `length` bytes from `offset`. With `whole`, a
// file whose rest is longer than `length` is not read at all (FileData says
// too_large): how a caller refuses an unbounded read without paying for it.
struct ReadRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 64 * kMiB;
  bool whole = false;
};

struct FileData {
  std::string data;
  std::uint64_t size = 0;  // the file's size when it was opened
  bool too_large = false;  // ReadRange::whole and the rest exceeds length
};

struct Usage {
  std::uint64_t memory_bytes = 0;
  std::uint64_t peak_memory_bytes = 0;
  std::chrono::microseconds cpu_time{0};
  std::uint32_t processes = 0;
  std::uint64_t disk_bytes = 0;
  // "cgroup v1" / "cgroup v2" / "rlimits only": where the numbers come from.
  std::string accounting;
};

// save_layer: what the sandbox changed, as one OCI layer tar (issue 15).
struct SaveLimits {
  std::uint64_t max_bytes = 8ull << 30;
  std::uint64_t max_entries = 2'000'000;
};
struct SavedLayer {
  std::uint64_t bytes = 0;    // of the tar
  std::uint64_t entries = 0;
  std::uint64_t skipped = 0;      // fifos, sockets, devices: not in the layer
  std::uint64_t unreadable = 0;   // the sandbox user could not read them
  std::vector<std::string> skipped_paths;  // the first few of both
  bool whole_root = false;  // writes to / are in it (else /workspace only)
  bool consistent = false;  // taken with the sandbox's processes frozen
  std::string note;         // why not consistent
};

// Issue 18: an interactive shell on a pseudo-terminal inside the sandbox.
struct TerminalRequest {
  std::uint16_t cols = 80;
  std::uint16_t rows = 24;
  // Empty: the image's login shell (`bash -l` where bash exists, else `sh -l`).
  std::vector<std::string> argv;
  std::map<std::string, std::string> env;  // over the base and spec env; TERM=xterm-256color
  std::string cwd;                          // empty = spec workdir
};

// Terminals open at once in one sandbox; the next is kResourceExhausted.
inline constexpr int kMaxTerminalsPerSandbox = 4;

// One open terminal. Nothing blocks: fd() is what an event loop waits on
// (no thread per terminal), read/write move what the pty takes now. The
// output is bounded by its reader: a shell whose output nobody reads stops
// in its write (the kernel's pty buffer is the only buffer). Destroying it
// kills the shell and everything it started. Not thread-safe: one owner.
class Terminal {
 public:
  virtual ~Terminal() = default;
  // Readable (POLLIN) while output waits or the end has come and not been
  // read yet.
  virtual int fd() const = 0;
  // What waits, at most `cap` bytes: 0 when nothing does (see ended()).
  virtual Result<std::size_t> read(char* buf, std::size_t cap) = 0;
  // What the pty takes now (keystrokes: the shell's input); may be short.
  virtual Result<std::size_t> write(std::string_view bytes) = 0;
  virtual Status resize(std::uint16_t cols, std::uint16_t rows) = 0;
  // The shell's status once it ended (its exit code, or 128 + the signal
  // that killed it; 137 when the sandbox went away), with all its output
  // read; nothing while it runs.
  virtual std::optional<int> exit_code() = 0;
  bool ended() { return exit_code().has_value(); }
  // Kills the shell and everything it started; exit_code() follows.
  virtual void kill() = 0;
};

// Counts a sandbox's open terminals; each holds a Lease until destroyed.
class TerminalSlots {
 public:
  using Lease = std::shared_ptr<void>;
  Result<Lease> acquire() {
    auto count = count_;
    int now = count->load();
    do {
      if (now >= kMaxTerminalsPerSandbox)
        return Error::make(ErrorCode::kResourceExhausted,
                           "this sandbox has " + std::to_string(kMaxTerminalsPerSandbox) +
                               " terminals open already (the most it may have): close one first");
    } while (!count->compare_exchange_weak(now, now + 1));
    return Lease(nullptr, [count](void*) { count->fetch_sub(1); });
  }

 private:
  std::shared_ptr<std::atomic<int>> count_ = std::make_shared<std::atomic<int>>(0);
};

class Sandbox {
 public:
  virtual ~Sandbox() = default;
  virtual const std::string& id() const = 0;
  virtual const SandboxSpec& spec() const = 0;

  // Thread-safe: several execs may run at once in one sandbox.
  virtual Result<ExecResult> exec(const ExecRequest& req, const ExecCallbacks& callbacks = {},
                                  const CancelToken* cancel = nullptr) = 0;

  // Paths are sandbox paths: absolute, or relative to the spec workdir;
  // '..' components are refused. Backends do file work inside the sandbox,
  // with the sandbox's own identity, never with the server's (symlinks are
  // the sandbox's to resolve). Anything but a regular file (a FIFO, socket or
  // device) is refused by read and write with kFailedPrecondition, unopened.
  virtual Result<FileStat> stat(const std::string& path) = 0;
  virtual Result<Listing> list(const std::string& path, const ListOptions& options = {}) = 0;
  // Whether anything below a listing's watched tree (Listing::watch) was
  // created, changed, moved or removed since that listing. nullopt: the
  // backend cannot tell (no watch, or the watch was given up).
  virtual std::optional<bool> changed_since(std::uint64_t /*watch*/) { return std::nullopt; }
  virtual Result<FileData> read_file(const std::string& path, const ReadRange& range = {}) = 0;
  // `parents`: create missing parent directories first.
  virtual Status write_file(const std::string& path, std::string_view data, std::uint32_t mode = 0644,
                            bool parents = false) = 0;
  virtual Status mkdir(const std::string& path, bool parents = true) = 0;
  virtual Status remove(const std::string& path, bool recursive = false) = 0;
  // Moves a file (never a directory) to `to`, replacing a file or symlink
  // there; a directory at `to` fails with EISDIR. Done inside the sandbox,
  // like every file call.
  virtual Status rename(const std::string& /*from*/, const std::string& /*to*/) {
    return Error::make(ErrorCode::kFailedPrecondition, "this sandbox backend cannot rename files");
  }

  virtual Result<Usage> usage() = 0;

  // Writes the sandbox's changes (an image's overlay upper dir and
  // /workspace; /workspace alone on image "host") as an uncompressed OCI
  // layer tar to tar_path (created, must not exist). The walk happens
  // inside the sandbox, never by the server on the sandbox's tree.
  virtual Result<SavedLayer> save_layer(const std::string& /*tar_path*/, const SaveLimits& /*limits*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot save a sandbox");
  }

  // Backends whose images live outside sandcastle's image store (a
  // container engine's): save_sandbox makes the image there, from the
  // sandbox's /workspace on top of its own image, named `name`, for
  // `owner` ("" the operator): a name the engine has that `owner` did not
  // make is refused (kAlreadyExists), as in the image store.
  virtual bool saves_own_images() const { return false; }
  struct SavedImage {
    std::string name;
    std::string id;
    std::string base;
    std::uint64_t workspace_bytes = 0;  // of the tar taken inside the sandbox
  };
  virtual Result<SavedImage> save_image(const std::string& /*name*/, const std::string& /*owner*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend saves into the image store");
  }

  // Writes `name` (no '/') into the directory every sandbox of this backend
  // sees read-only at kSharedDir; an existing file of that name is replaced
  // atomically. Backends without one say kUnavailable.
  virtual Status publish_shared(const std::string& /*name*/, std::string_view /*data*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no shared directory");
  }
  // Whether `name` was published (a look at the server's own directory,
  // never at the sandbox's tree).
  virtual bool has_shared(const std::string& /*name*/) const { return false; }

  // Kills every process and releases everything; idempotent. Later calls
  // fail with kUnavailable. A persistent sandbox's files go too.
  virtual Status destroy() = 0;

  // False once the sandbox's processes are gone without destroy() (its
  // init killed from outside or by the OOM killer, the zygote that made it
  // killed): calls to it can only fail. Cheap enough for every call. With
  // `grace`, waits that long for a death under way: a call may fail on its
  // processes' deaths just before the sandbox's own is final.
  virtual bool alive(std::chrono::milliseconds /*grace*/ = {}) const { return true; }
  // Once !alive(): why, when the backend knows better than "its processes
  // died" (an engine that stopped answering: the sandbox is lost with it).
  virtual std::string lost_reason() const { return {}; }

  // Where the sandbox runs when a backend has several places (the engine's
  // name with several engines, issue 17); "" when there is one.
  virtual std::string location() const { return {}; }

  // Issue 16. Kills every process like destroy(), but a persistent
  // sandbox's files stay where the backend keeps them (keyed by the spec's
  // storage_id), for a later create with the same storage_id: how a server
  // stops, and how a pause without a memory checkpoint keeps the files.
  virtual Status release() { return destroy(); }

  // Stops every process where it stands (cgroup freezer) and lets them go
  // on; the memory stays in use. Idempotent.
  virtual Status freeze() {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot freeze a sandbox");
  }
  virtual Status thaw() {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot thaw a sandbox");
  }

  // Brings a persistent sandbox's files on disk up to date with what its
  // calls wrote, for backends that keep a copy there (the native one
  // without root); ok at once for the others. The backend's own calls
  // (exec, write_file, ...) do it before returning; a caller that lets the
  // sandbox write by other means (a kernel cell over a passed fd) calls it
  // before reporting that work done.
  virtual Status persist_changes() { return {}; }

  // Writes the state of every process (memory, registers, files open) into
  // `dir` (created, must not exist) and ends them, keeping the files as
  // release() does; Backend::restore brings the sandbox back from it.
  virtual Status checkpoint(const std::string& /*dir*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot checkpoint a sandbox");
  }

  // An interactive shell on a new pseudo-terminal in the sandbox (its
  // namespaces, uid and filters); at most kMaxTerminalsPerSandbox at once.
  // Ending the sandbox ends its terminals.
  virtual Result<std::unique_ptr<Terminal>> open_terminal(const TerminalRequest& /*req*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no terminals");
  }

  // Allowlist mode: sockets on 127.0.0.1 inside the sandbox that the
  // server's proxies serve (net/proxy_service.h): the HTTP and SOCKS5 proxies
  // when `proxies`, and the DNS stub (TCP, and UDP where the backend can hand
  // a datagram socket over). Opened before the sandbox's programs could take
  // the ports; called once per sandbox start.
  virtual Result<net::Listeners> open_net_listeners(bool /*proxies*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no network listeners");
  }

  // Full mode: the sandbox's network namespace and the user namespace that
  // owns it, as fds the server can setns into (pasta, nft). Got from the
  // sandbox's init by handle, never by a path the sandbox controls.
  virtual Result<NetNamespaces> network_namespaces() {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no network namespace");
  }
};

struct BackendCapabilities {
  bool user_namespaces = false;
  bool cgroup_limits = false;  // memory/pids/cpu enforced by cgroups
  bool seccomp = false;
  bool rootless = false;       // running without host root
  std::string cgroup_version;  // "v1", "v2" or "none"
  std::vector<std::string> notes;  // weakened guarantees, e.g. "memory limit via RLIMIT_DATA"
};

struct BackendImage {
  std::string name;  // repo:tag as the backend names it
  std::string id;
  std::uint64_t size_bytes = 0;
  std::int64_t created_unix = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  // Backends that keep their own images (a container engine): create()
  // takes their names, list_images() shows them, and sandcastle's image
  // store is not asked.
  virtual bool owns_images() const { return false; }
  virtual Result<std::vector<BackendImage>> list_images() {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend has no images of its own");
  }
  virtual std::string name() const = 0;
  virtual const BackendCapabilities& capabilities() const = 0;
  virtual Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) = 0;

  // Issue 16: persistent sandboxes. A spec with Persistence::kPersistent
  // names its storage (SpecOptions::storage_id); create() makes that storage
  // when it does not exist and reuses it when it does (a restart).

  // Why checkpoint()/restore() cannot work here (ok: they can).
  virtual Status checkpoint_support() const {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot checkpoint");
  }
  // A sandbox for `spec` whose processes come back from Sandbox::checkpoint's
  // `dir`, on the storage the spec names.
  virtual Result<std::unique_ptr<Sandbox>> restore(const SandboxSpec& /*spec*/,
                                                   const std::string& /*dir*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot restore a checkpoint");
  }
  // Copies the files of storage `from` (its sandbox may be running: the copy
  // is taken with its writes held) into new storage `to` (fork_sandbox).
  virtual Status copy_storage(const std::string& /*from*/, const std::string& /*to*/) {
    return Error::make(ErrorCode::kUnavailable, "this sandbox backend cannot copy a sandbox's files");
  }
  // Deletes storage whose sandbox is not running; a missing one is ok.
  virtual Status remove_storage(const std::string& /*id*/) { return {}; }
  // The storage ids on disk (the server removes those no record names).
  virtual std::vector<std::string> list_storage() const { return {}; }
  // Sandboxes made ahead of demand and ready to hand out (the backend's warm
  // pool, the only one).
  virtual std::size_t warm_ready() const { return 0; }
  // What warm sandboxes made from now on start ahead (AheadCommand);
  // nothing: none. A backend without a warm pool ignores it.
  virtual void set_ahead_command(std::optional<AheadCommand> /*command*/) {}
  // A clean exit: destroys every sandbox and removes everything the backend
  // made on the host; create fails afterwards.
  virtual void shutdown() {}
};

}  // namespace sandcastle::sandbox
