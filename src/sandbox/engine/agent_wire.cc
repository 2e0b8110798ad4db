#include "sandbox/engine/agent_wire.h"

#include <cstring>

#include "sandbox/native/wire.h"

namespace sandcastle::sandbox::engine {
namespace {

using native::WireReader;
using native::WireWriter;

std::string with_kind(AgentMsg kind, const WireWriter& body) {
  WireWriter w;
  w.u32(static_cast<std::uint32_t>(kind));
  return w.bytes() + body.bytes();
}

std::string two(AgentMsg kind, std::uint32_t a, std::uint32_t b) {
  WireWriter w;
  w.u32(a);
  w.u32(b);
  return with_kind(kind, w);
}

std::string one(AgentMsg kind, std::uint32_t a) {
  WireWriter w;
  w.u32(a);
  return with_kind(kind, w);
}

void put_le32(char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

std::uint32_t get_le32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i)
    v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::optional<AgentExec> read_exec(WireReader& r) {
  AgentExec e;
  e.id = r.u32();
  e.argv = r.strs();
  e.env = r.strs();
  e.cwd = r.str();
  e.timeout_ms = r.u64();
  e.rlimit_nofile = r.u64();
  e.rlimit_fsize = r.u64();
  e.rlimit_nproc = r.u64();
  e.rlimit_data = r.u64();
  e.ch_stdin = r.u32();
  e.ch_stdout = r.u32();
  e.ch_stderr = r.u32();
  e.ch_fd3 = r.u32();
  std::uint32_t port = r.u32();
  std::uint32_t shell_env = r.u32();
  std::uint32_t size = r.u32();  // cols << 16 | rows
  if (!r.ok() || port > 0xffff || shell_env > 1 || e.argv.empty()) return std::nullopt;
  e.listen_port = static_cast<std::uint16_t>(port);
  e.shell_env = shell_env == 1;
  e.pty_cols = static_cast<std::uint16_t>(size >> 16);
  e.pty_rows = static_cast<std::uint16_t>(size & 0xffff);
  // A terminal: both sizes, its one channel, and no other.
  if ((e.pty_cols == 0) != (e.pty_rows == 0)) return std::nullopt;
  if (e.pty_rows != 0 && (e.ch_stdin == 0 || e.ch_stdout || e.ch_stderr || e.ch_fd3 || e.listen_port))
    return std::nullopt;
  return e;
}

bool decode_fields(AgentControl& m, WireReader& r) {
  switch (m.kind) {
    case AgentMsg::kHello:
    case AgentMsg::kStarted:
    case AgentMsg::kSignal:
    case AgentMsg::kCredit:
    case AgentMsg::kAccepted:
    case AgentMsg::kResize:
    case AgentMsg::kListen:
    case AgentMsg::kListening:
      m.a = r.u32();
      m.b = r.u32();
      if (m.kind == AgentMsg::kListen && (m.b >> 16) > static_cast<std::uint32_t>(ListenKind::kDns))
        return false;
      if (m.kind == AgentMsg::kListening && m.b > 0xffff) return false;
      if (m.kind == AgentMsg::kSignal && m.b != static_cast<std::uint32_t>(AgentSignal::kCancel) &&
          m.b != static_cast<std::uint32_t>(AgentSignal::kInterrupt))
        return false;
      return true;
    case AgentMsg::kClose:
    case AgentMsg::kUsageQuery: m.a = r.u32(); return true;
    case AgentMsg::kFiles:
      m.a = r.u32();
      m.c = r.u64();
      return true;
    case AgentMsg::kUsage:
      m.a = r.u32();
      m.b = r.u32();
      m.c = r.u64();
      return true;
    case AgentMsg::kExec: m.exec = read_exec(r); return m.exec.has_value();
    case AgentMsg::kExecFailed: {
      AgentFailure f;
      f.id = r.u32();
      f.err = r.i32();
      f.step = r.str();
      if (f.step.size() > 128) return false;
      m.failure = f;
      return true;
    }
    case AgentMsg::kDone: {
      AgentDone d;
      d.id = r.u32();
      d.wait_status = r.i32();
      std::uint32_t end = r.u32();
      d.cpu_us = r.u64();
      d.maxrss_kib = r.u64();
      if (end > static_cast<std::uint32_t>(AgentEnd::kCancelled)) return false;
      d.end = static_cast<AgentEnd>(end);
      m.done = d;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string encode_frame(std::uint32_t channel, std::string_view payload) {
  std::string out(kFrameHeader + payload.size(), '\0');
  put_le32(out.data(), channel);
  put_le32(out.data() + 4, static_cast<std::uint32_t>(payload.size()));
  if (!payload.empty()) std::memcpy(out.data() + kFrameHeader, payload.data(), payload.size());
  return out;
}

FrameHeader decode_frame_header(const char (&bytes)[kFrameHeader]) {
  return FrameHeader{get_le32(bytes), get_le32(bytes + 4)};
}

std::string encode_hello(std::uint32_t pid) {
  return two(AgentMsg::kHello, kAgentProtocolVersion, pid);
}

std::string encode_exec(const AgentExec& e) {
  WireWriter w;
  w.u32(e.id);
  w.strs(e.argv);
  w.strs(e.env);
  w.str(e.cwd);
  w.u64(e.timeout_ms);
  w.u64(e.rlimit_nofile);
  w.u64(e.rlimit_fsize);
  w.u64(e.rlimit_nproc);
  w.u64(e.rlimit_data);
  w.u32(e.ch_stdin);
  w.u32(e.ch_stdout);
  w.u32(e.ch_stderr);
  w.u32(e.ch_fd3);
  w.u32(e.listen_port);
  w.u32(e.shell_env ? 1 : 0);
  w.u32((std::uint32_t{e.pty_cols} << 16) | e.pty_rows);
  return with_kind(AgentMsg::kExec, w);
}

std::string encode_started(std::uint32_t id, std::uint32_t pid) {
  return two(AgentMsg::kStarted, id, pid);
}

std::string encode_failure(const AgentFailure& f) {
  WireWriter w;
  w.u32(f.id);
  w.i32(f.err);
  w.str(f.step.substr(0, 128));
  return with_kind(AgentMsg::kExecFailed, w);
}

std::string encode_done(const AgentDone& d) {
  WireWriter w;
  w.u32(d.id);
  w.i32(d.wait_status);
  w.u32(static_cast<std::uint32_t>(d.end));
  w.u64(d.cpu_us);
  w.u64(d.maxrss_kib);
  return with_kind(AgentMsg::kDone, w);
}

std::string encode_signal(std::uint32_t id, AgentSignal s) {
  return two(AgentMsg::kSignal, id, static_cast<std::uint32_t>(s));
}

std::string encode_files(std::uint32_t channel, std::uint64_t rlimit_fsize) {
  WireWriter w;
  w.u32(channel);
  w.u64(rlimit_fsize);
  return with_kind(AgentMsg::kFiles, w);
}

std::string encode_credit(std::uint32_t channel, std::uint32_t bytes) {
  return two(AgentMsg::kCredit, channel, bytes);
}
std::string encode_close(std::uint32_t channel) {
  return one(AgentMsg::kClose, channel);
}
std::string encode_usage_query(std::uint32_t request) {
  return one(AgentMsg::kUsageQuery, request);
}

std::string encode_usage(std::uint32_t request, std::uint32_t processes, std::uint64_t disk_bytes) {
  WireWriter w;
  w.u32(request);
  w.u32(processes);
  w.u64(disk_bytes);
  return with_kind(AgentMsg::kUsage, w);
}

std::string encode_accepted(std::uint32_t id, std::uint32_t channel) {
  return two(AgentMsg::kAccepted, id, channel);
}

std::string encode_resize(std::uint32_t id, std::uint16_t cols, std::uint16_t rows) {
  return two(AgentMsg::kResize, id, (std::uint32_t{cols} << 16) | rows);
}

std::string encode_listen(std::uint32_t id, ListenKind kind, std::uint16_t port) {
  return two(AgentMsg::kListen, id, (static_cast<std::uint32_t>(kind) << 16) | port);
}

std::string encode_listening(std::uint32_t id, std::uint16_t port) {
  return two(AgentMsg::kListening, id, port);
}

std::optional<AgentControl> decode_control(std::string_view payload) {
  WireReader r(payload);
  std::uint32_t kind = r.u32();
  if (!r.ok() || kind < static_cast<std::uint32_t>(AgentMsg::kHello) ||
      kind > static_cast<std::uint32_t>(AgentMsg::kListening))
    return std::nullopt;
  AgentControl m;
  m.kind = static_cast<AgentMsg>(kind);
  if (!decode_fields(m, r) || !r.ok() || !r.at_end()) return std::nullopt;
  return m;
}

}  // namespace sandcastle::sandbox::engine
