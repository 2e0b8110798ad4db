// The byte format spoken between the server and the sandbox init helper: a
// flat sequence of little-endian integers and length-prefixed strings. Both
// ends are built from this file, so there is no versioning; every read is
// bounds-checked because the bytes cross a trust boundary on the way back.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandcastle::sandbox::native {

class WireWriter {
 public:
  void u32(std::uint32_t v) { raw(&v, sizeof v); }
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void i32(std::int32_t v) { raw(&v, sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<std::uint32_t>(s.size()));
    buf_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<std::uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  const std::string& bytes() const { return buf_; }

 private:
  void raw(const void* p, std::size_t n) { buf_.append(static_cast<const char*>(p), n); }
  std::string buf_;
};

class WireReader {
 public:
  explicit WireReader(std::string_view data) : d_(data) {}
  bool ok() const { return ok_; }
  bool at_end() const { return d_.empty(); }
  std::uint32_t u32() { return num<std::uint32_t>(); }
  std::uint64_t u64() { return num<std::uint64_t>(); }
  std::int32_t i32() { return num<std::int32_t>(); }
  std::string str();
  std::vector<std::string> strs();

 private:
  template <typename T>
  T num();
  std::string_view d_;
  bool ok_ = true;
};

enum class MountKind : std::uint32_t {
  kMkdir = 1,    // mkdir dst (mode)
  kTmpfs,        // tmpfs at dst (size, mode, extra options)
  kBind,         // recursive bind src -> dst, then read-only/nosuid/nodev
  kBindFile,     // create empty file dst, bind src over it (device nodes)
  kProc,         // fresh procfs at dst
  kDevpts,       // new devpts instance at dst
  kSymlink,      // symlink src (target) at dst
  kReadOnly,     // make the mount at dst read-only (after its content is built)
  kSubmount,     // bind dst onto itself: its own mount of the same filesystem
                 // (writable or not, "noexec" in options), nosuid/nodev
  kResize,       // remount the tmpfs at dst with size (and options)
  kMask,         // hide dst (if it exists) under src/file or src/dir, empty
                 // and read-only, whichever matches dst's type
  kReadOnlyPath, // bind dst (if it exists) onto itself, read-only, recursively
  kOverlay,      // overlayfs at dst (userxattr, nosuid, nodev): src = lower
                 // dirs (absolute, top first, ':' between), options = a dir
                 // relative to the new root holding upper/ and work/
  kMove,         // move the mount at src (relative to the new root) to dst
  kRealDir,      // make dst a directory (mode) that is no symlink: whatever
                 // else is there (an image's symlink, file) is removed first,
                 // never followed (in an overlay: whited out)
  // Copy the host dir src into dst (an upper dir, before its overlay), at
  // most size bytes, in the sandbox's context (persist_mirror.h).
  kRestoreMirror,
};

struct MountOp {
  MountKind kind = MountKind::kMkdir;
  std::string src;
  std::string dst;  // relative to the new root
  std::uint64_t size = 0;
  std::uint32_t mode = 0755;
  bool writable = false;
  std::string options;

  std::string describe() const;
};

// What the init helper needs to build the spec-independent part of the
// sandbox (it may do so long before the sandbox is asked for): the root
// filesystem up to pivot_root, loopback, and what each exec applies.
struct InitConfig {
  std::string new_root;  // host directory the root tmpfs is mounted on
  std::vector<MountOp> mounts;  // relative to new_root, applied before pivot_root
  std::string seccomp_bpf;  // struct sock_filter array, applied in each exec
  std::uint32_t uid = 1000;
  std::uint32_t gid = 1000;
  // Non-empty: pivot_root into new_root/root_subdir (a mount the plan made:
  // an image's overlay) instead of new_root itself.
  std::string root_subdir;
};

std::string encode(const InitConfig& c);
std::optional<InitConfig> decode_init_config(std::string_view bytes);

// The spec-dependent rest, sent when the sandbox is created: sized tmpfs
// mounts and the final read-only remounts (relative to the new root, after
// pivot_root), and the hostname.
struct FinishConfig {
  std::vector<MountOp> mounts;
  std::string hostname;
};

std::string encode(const FinishConfig& c);
std::optional<FinishConfig> decode_finish_config(std::string_view bytes);

// ExecWire's flags word.
constexpr std::uint32_t kExecShellEnv = 1;
constexpr std::uint32_t kExecLast = 2;

struct ExecWire {
  std::vector<std::string> argv;
  std::vector<std::string> env;  // "KEY=value"
  std::string cwd;
  std::uint64_t timeout_ms = 0;
  std::uint64_t rlimit_nofile = 1024;
  std::uint64_t rlimit_fsize = 0;
  std::uint64_t rlimit_nproc = 0;
  std::uint64_t rlimit_data = 0;  // 0 = leave unlimited (the cgroup fences memory)
  // Nonzero: init starts this exec's supervisor in a network namespace of
  // its own, which opens a listener on 127.0.0.1:listen_port there and
  // sends it to the server (ReportKind::kListener) before the command starts.
  std::uint16_t listen_port = 0;
  // ExecRequest::shell_env: PWD, SHLVL and _ as bash would set them.
  bool shell_env = false;
  // ExecRequest::last: nothing runs after this; init starts no supervisor
  // for a next exec (a one-shot's would only be made to be killed).
  bool last = false;
  // Nonzero rows: a terminal (issue 18). The command opens a pty pair in the
  // sandbox's devpts, makes the slave its controlling tty and fds 0-2 (the
  // stdio fds of the request go unused) and sends the master to the server
  // (ReportKind::kTerminal) before it execs.
  std::uint16_t pty_cols = 0;
  std::uint16_t pty_rows = 0;
};

std::string encode(const ExecWire& e);
std::optional<ExecWire> decode_exec(std::string_view bytes);

// Every message on a sandbox's control socket starts with its kind (u32).
//   kExec:   ExecWire; fds: report socket, stdin, stdout, stderr.
//   kFiles:  FilesWire; fd: the server's file channel, served by a worker
//            init forks (file_worker.h). (Kind 2, a listener in the shared
//            network namespace, is retired.)
//   kSaveLayer: LayerExportWire; fd: the stream a worker init forks writes
//            the sandbox's changes to as a layer tar (layer_export.h).
//   kPersistMirror: PersistMirrorWire; fds: the reply stream, then the
//            on-disk directory a worker init forks copies /workspace to or
//            from (a copy's target third) (persist_mirror.h).
//   kNetListeners: NetListenersWire; fd: a SEQPACKET socket init answers on
//            with one message: an i32 errno per listener asked for (0 =
//            opened) and the opened sockets, in order, as SCM_RIGHTS.
enum class ControlKind : std::uint32_t {
  kExec = 1,
  kFiles = 3,
  kSaveLayer = 4,
  kPersistMirror = 5,
  kNetListeners = 6,
  kAhead = 7
};

// kAhead (AheadCommand): init replaces its waiting exec slot with one whose
// command is started now; the slot is kept however long it waits. The exec
// it is handed is a last one (ExecWire::last) that matches `command` in its
// first shared_words argv words, plus one more word, and in every other
// field but the timeout.
struct AheadWire {
  ExecWire command;
  std::uint32_t shared_words = 0;  // 1 .. argv.size() - 1
};
std::string encode(const AheadWire& w);
std::optional<AheadWire> decode_ahead(std::string_view bytes);
// Whether `req` is the exec `ahead` was started for (see AheadWire).
bool ahead_matches(const AheadWire& ahead, const ExecWire& req);

// Sockets on 127.0.0.1 in the sandbox's network namespace that the server
// serves (net/proxy_service.h): its proxies and DNS stub. Init opens them
// itself (it keeps the capability to bind below 1024 in the sandbox's user
// namespace; the sandbox's programs have none), so they exist before any
// program of the sandbox runs on a pooled sandbox's first exec.
constexpr std::size_t kMaxNetListeners = 4;  // fits one message's fds
struct NetListenerWant {
  bool udp = false;
  std::uint16_t port = 0;
};
struct NetListenersWire {
  std::vector<NetListenerWant> want;  // 1..kMaxNetListeners
};
std::string encode(const NetListenersWire& w);
std::optional<NetListenersWire> decode_net_listeners(std::string_view bytes);

struct ControlMessage {
  ControlKind kind = ControlKind::kExec;
  std::string_view payload;
};
std::string encode_control(ControlKind kind, std::string_view payload);
std::optional<ControlMessage> decode_control(std::string_view bytes);

// Messages from the per-exec supervisor to the server. kListener (only for
// an exec with a listen_port, before kDone or kSetupError) carries the
// listening socket as SCM_RIGHTS and no other field; kTerminal (only for an
// exec with pty_rows, before kDone or kSetupError) the pty master likewise.
enum class ReportKind : std::uint32_t { kSetupError = 1, kDone = 2, kListener = 3, kTerminal = 4 };
enum class SupervisorEnd : std::uint32_t { kExited = 0, kTimeout = 1, kCancelled = 2 };

struct ExecReport {
  ReportKind kind = ReportKind::kDone;
  std::int32_t err = 0;  // kSetupError
  std::string step;      // kSetupError
  std::int32_t wait_status = 0;
  SupervisorEnd end = SupervisorEnd::kExited;
  std::uint64_t cpu_us = 0;
  std::uint64_t maxrss_kib = 0;
};

std::string encode(const ExecReport& r);
std::optional<ExecReport> decode_report(std::string_view bytes);

// Fixed-size record the init helper writes to its status pipe, twice: after
// the InitConfig part ("prepared") and after the FinishConfig part ("ready").
// err != 0 ends it: step names what failed ("mount /proc").
struct InitStatus {
  std::int32_t err = 0;
  char step[244] = {};
};

}  // namespace sandcastle::sandbox::native
