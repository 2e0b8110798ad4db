#include "sandbox/native/wire.h"

#include <algorithm>
#include <cstring>

namespace sandcastle::sandbox::native {

template <typename T>
T WireReader::num() {
  T v{};
  if (!ok_ || d_.size() < sizeof v) {
    ok_ = false;
    return v;
  }
  std::memcpy(&v, d_.data(), sizeof v);
  d_.remove_prefix(sizeof v);
  return v;
}

std::string WireReader::str() {
  std::uint32_t n = u32();
  if (!ok_ || d_.size() < n) {
    ok_ = false;
    return {};
  }
  std::string s(d_.substr(0, n));
  d_.remove_prefix(n);
  return s;
}

std::vector<std::string> WireReader::strs() {
  std::uint32_t n = u32();
  std::vector<std::string> v;
  // Each string needs at least its 4-byte length: reject absurd counts early.
  if (!ok_ || n > d_.size() / 4) {
    ok_ = false;
    return v;
  }
  v.reserve(n);
  for (std::uint32_t i = 0; i < n && ok_; ++i) v.push_back(str());
  return v;
}

std::string MountOp::describe() const {
  switch (kind) {
    case MountKind::kMkdir: return "mkdir /" + dst;
    case MountKind::kTmpfs: return "mount tmpfs /" + dst;
    case MountKind::kBind:
    case MountKind::kBindFile: return "bind " + src + " -> /" + dst;
    case MountKind::kProc: return "mount /" + dst;
    case MountKind::kDevpts: return "mount devpts /" + dst;
    case MountKind::kSymlink: return "symlink /" + dst + " -> " + src;
    case MountKind::kReadOnly: return "remount read-only /" + dst;
    case MountKind::kSubmount: return "bind /" + dst + " onto itself";
    case MountKind::kResize: return "resize tmpfs /" + dst;
    case MountKind::kMask: return "mask /" + dst;
    case MountKind::kReadOnlyPath: return "bind /" + dst + " onto itself read-only";
    case MountKind::kOverlay: return "mount overlay /" + dst;
    case MountKind::kMove: return "move /" + src + " -> /" + dst;
    case MountKind::kRealDir: return "make /" + dst + " a directory";
    case MountKind::kRestoreMirror: return "restore /" + dst + " from " + src;
  }
  return "mount op";
}

namespace {

void put_mounts(WireWriter& w, const std::vector<MountOp>& mounts) {
  w.u32(static_cast<std::uint32_t>(mounts.size()));
  for (const auto& m : mounts) {
    w.u32(static_cast<std::uint32_t>(m.kind));
    w.str(m.src);
    w.str(m.dst);
    w.u64(m.size);
    w.u32(m.mode);
    w.u32(m.writable ? 1 : 0);
    w.str(m.options);
  }
}

bool get_mounts(WireReader& r, std::vector<MountOp>& out) {
  std::uint32_t n = r.u32();
  if (!r.ok() || n > 4096) return false;
  for (std::uint32_t i = 0; i < n && r.ok(); ++i) {
    MountOp m;
    std::uint32_t kind = r.u32();
    if (kind < 1 || kind > static_cast<std::uint32_t>(MountKind::kRestoreMirror)) return false;
    m.kind = static_cast<MountKind>(kind);
    m.src = r.str();
    m.dst = r.str();
    m.size = r.u64();
    m.mode = r.u32();
    m.writable = r.u32() != 0;
    m.options = r.str();
    out.push_back(std::move(m));
  }
  return r.ok();
}

}  // namespace

std::string encode(const InitConfig& c) {
  WireWriter w;
  w.str(c.new_root);
  put_mounts(w, c.mounts);
  w.str(c.seccomp_bpf);
  w.u32(c.uid);
  w.u32(c.gid);
  w.str(c.root_subdir);
  return w.bytes();
}

std::optional<InitConfig> decode_init_config(std::string_view bytes) {
  WireReader r(bytes);
  InitConfig c;
  c.new_root = r.str();
  if (!get_mounts(r, c.mounts)) return std::nullopt;
  c.seccomp_bpf = r.str();
  c.uid = r.u32();
  c.gid = r.u32();
  c.root_subdir = r.str();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return c;
}

std::string encode(const FinishConfig& c) {
  WireWriter w;
  put_mounts(w, c.mounts);
  w.str(c.hostname);
  return w.bytes();
}

std::optional<FinishConfig> decode_finish_config(std::string_view bytes) {
  WireReader r(bytes);
  FinishConfig c;
  if (!get_mounts(r, c.mounts)) return std::nullopt;
  c.hostname = r.str();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return c;
}

std::string encode(const ExecWire& e) {
  WireWriter w;
  w.strs(e.argv);
  w.strs(e.env);
  w.str(e.cwd);
  w.u64(e.timeout_ms);
  w.u64(e.rlimit_nofile);
  w.u64(e.rlimit_fsize);
  w.u64(e.rlimit_nproc);
  w.u64(e.rlimit_data);
  w.u32(e.pty_cols);
  w.u32(e.pty_rows);
  w.u32(e.listen_port);
  w.u32((e.shell_env ? kExecShellEnv : 0) | (e.last ? kExecLast : 0));
  return w.bytes();
}

std::optional<ExecWire> decode_exec(std::string_view bytes) {
  WireReader r(bytes);
  ExecWire e;
  e.argv = r.strs();
  e.env = r.strs();
  e.cwd = r.str();
  e.timeout_ms = r.u64();
  e.rlimit_nofile = r.u64();
  e.rlimit_fsize = r.u64();
  e.rlimit_nproc = r.u64();
  e.rlimit_data = r.u64();
  std::uint32_t cols = r.u32();
  std::uint32_t rows = r.u32();
  std::uint32_t port = r.u32();
  std::uint32_t flags = r.u32();
  if (!r.ok() || !r.at_end() || e.argv.empty() || port > 65535 ||
      (flags & ~(kExecShellEnv | kExecLast)) != 0)
    return std::nullopt;
  if (cols > 65535 || rows > 65535 || (cols == 0) != (rows == 0)) return std::nullopt;
  e.pty_cols = static_cast<std::uint16_t>(cols);
  e.pty_rows = static_cast<std::uint16_t>(rows);
  e.shell_env = (flags & kExecShellEnv) != 0;
  e.last = (flags & kExecLast) != 0;
  e.listen_port = static_cast<std::uint16_t>(port);
  return e;
}

std::string encode_control(ControlKind kind, std::string_view payload) {
  WireWriter w;
  w.u32(static_cast<std::uint32_t>(kind));
  std::string out = w.bytes();
  out.append(payload);
  return out;
}

std::optional<ControlMessage> decode_control(std::string_view bytes) {
  WireReader r(bytes);
  std::uint32_t kind = r.u32();
  if (!r.ok() || (kind != static_cast<std::uint32_t>(ControlKind::kExec) &&
                  kind != static_cast<std::uint32_t>(ControlKind::kFiles) &&
                  kind != static_cast<std::uint32_t>(ControlKind::kSaveLayer) &&
                  kind != static_cast<std::uint32_t>(ControlKind::kPersistMirror) &&
                  kind != static_cast<std::uint32_t>(ControlKind::kNetListeners) &&
                  kind != static_cast<std::uint32_t>(ControlKind::kAhead)))
    return std::nullopt;
  return ControlMessage{static_cast<ControlKind>(kind), bytes.substr(sizeof kind)};
}

std::string encode(const AheadWire& w) {
  WireWriter o;
  o.u32(w.shared_words);
  o.str(encode(w.command));
  return o.bytes();
}

std::optional<AheadWire> decode_ahead(std::string_view bytes) {
  WireReader r(bytes);
  AheadWire w;
  w.shared_words = r.u32();
  const std::string command = r.str();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  auto e = decode_exec(command);
  // Started with nothing of a request's own: no listener, no terminal.
  if (!e || e->listen_port != 0 || e->pty_rows != 0 || e->last || w.shared_words == 0 ||
      w.shared_words >= e->argv.size())
    return std::nullopt;
  w.command = std::move(*e);
  return w;
}

bool ahead_matches(const AheadWire& ahead, const ExecWire& req) {
  const ExecWire& c = ahead.command;
  // Only a sandbox's last exec (a one-shot's): a sandbox kept for more may
  // change what the command read at its start (packages installed on its
  // path, a disk mounted), which an interpreter that started before would
  // not see.
  return req.last && req.argv.size() == ahead.shared_words + 1 &&
         std::equal(c.argv.begin(), c.argv.begin() + ahead.shared_words, req.argv.begin()) &&
         req.env == c.env && req.cwd == c.cwd && req.rlimit_nofile == c.rlimit_nofile &&
         req.rlimit_fsize == c.rlimit_fsize && req.rlimit_nproc == c.rlimit_nproc &&
         req.rlimit_data == c.rlimit_data && req.listen_port == 0 && req.pty_rows == 0 &&
         req.shell_env == c.shell_env;
}

std::string encode(const ExecReport& rep) {
  WireWriter w;
  w.u32(static_cast<std::uint32_t>(rep.kind));
  w.i32(rep.err);
  w.str(rep.step);
  w.i32(rep.wait_status);
  w.u32(static_cast<std::uint32_t>(rep.end));
  w.u64(rep.cpu_us);
  w.u64(rep.maxrss_kib);
  return w.bytes();
}

std::optional<ExecReport> decode_report(std::string_view bytes) {
  WireReader r(bytes);
  ExecReport rep;
  std::uint32_t kind = r.u32();
  if (kind < 1 || kind > 4) return std::nullopt;
  rep.kind = static_cast<ReportKind>(kind);
  rep.err = r.i32();
  rep.step = r.str();
  rep.wait_status = r.i32();
  std::uint32_t end = r.u32();
  if (end > 2) return std::nullopt;
  rep.end = static_cast<SupervisorEnd>(end);
  rep.cpu_us = r.u64();
  rep.maxrss_kib = r.u64();
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return rep;
}

std::string encode(const NetListenersWire& w) {
  WireWriter o;
  o.u32(static_cast<std::uint32_t>(w.want.size()));
  for (const auto& l : w.want) o.u32((l.udp ? 0x10000U : 0U) | l.port);
  return o.bytes();
}

std::optional<NetListenersWire> decode_net_listeners(std::string_view bytes) {
  WireReader r(bytes);
  const std::uint32_t n = r.u32();
  if (!r.ok() || n == 0 || n > kMaxNetListeners) return std::nullopt;
  NetListenersWire w;
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t v = r.u32();
    if (v >> 17 != 0 || (v & 0xffffU) == 0) return std::nullopt;
    w.want.push_back({.udp = (v & 0x10000U) != 0, .port = static_cast<std::uint16_t>(v & 0xffffU)});
  }
  if (!r.ok() || !r.at_end()) return std::nullopt;
  return w;
}

}  // namespace sandcastle::sandbox::native

namespace sandcastle::sandbox::native {
template std::uint32_t WireReader::num<std::uint32_t>();
template std::uint64_t WireReader::num<std::uint64_t>();
template std::int32_t WireReader::num<std::int32_t>();
}  // namespace sandcastle::sandbox::native
