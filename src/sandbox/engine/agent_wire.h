// The agent protocol: how the server drives `sandcastle-agent`, the small
// static helper that runs inside every engine container (issue 17).
//
// WHY an agent: an Engine API exec costs 66-190 ms here (create, start,
// inspect, and a conmon per exec under Podman), and the API cannot kill an
// exec or pass a descriptor. So each container gets one long-lived agent,
// started once (off the request path, in the warm pool) as an attached exec,
// and every later call is a message on that one stream: an exec, a file
// session, a kernel's channel, a signal.
//
// Transport: one byte stream each way. Server to agent: the exec's stdin.
// Agent to server: its stdout (the engine wraps it in its own stdout frames,
// which the server removes first; the agent's stderr is its log). On that
// stream both sides speak frames:
//
//     u32 channel (little-endian) | u32 length (little-endian) | payload
//
// Channel 0 carries control messages (below). Every other channel is a byte
// pipe between a descriptor on the server and one in the container (a
// command's stdin, stdout, stderr or fd 3, a file worker's socket). The
// server picks channel numbers (from 1, never reused on one stream). A data
// frame of length 0 is the sender's EOF on that channel (half close).
//
// Flow control: a sender may have at most kWindow bytes of one channel's data
// in flight; the receiver returns credit (kCredit) as it hands bytes on to
// the channel's descriptor. So a command that does not read its stdin, or a
// server that is slow to read a command's output, stalls only that channel,
// never the stream, and neither side buffers more than kWindow per channel.
//
// Trust: the agent runs as the sandbox user inside the container; everything
// it sends is hostile input. The server bounds every frame (kMaxFrameFromAgent),
// every count, and drops the stream on any malformed byte.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandcastle::sandbox::engine {

inline constexpr std::uint32_t kAgentProtocolVersion = 1;
inline constexpr std::size_t kFrameHeader = 8;
inline constexpr std::uint32_t kControlChannel = 0;
// Data frames carry at most this much (both ways).
inline constexpr std::uint32_t kMaxDataFrame = 64 * 1024;
// Unacknowledged data per channel and direction.
inline constexpr std::uint32_t kWindow = 256 * 1024;
// A control frame from the server (an exec's argv and environment).
inline constexpr std::uint32_t kMaxFrameToAgent = 4 * 1024 * 1024;
// Any frame from the agent (its control messages are small).
inline constexpr std::uint32_t kMaxFrameFromAgent = kMaxDataFrame;
// Channels open at once on one stream (each is descriptors on both sides).
inline constexpr std::uint32_t kMaxChannels = 1024;

enum class AgentMsg : std::uint32_t {
  // agent -> server, first frame: protocol version, the agent's pid.
  kHello = 1,
  // server -> agent: start a command (AgentExec). Answered by kStarted or
  // kExecFailed, then (after kStarted) exactly one kDone.
  kExec = 2,
  kStarted = 3,     // agent -> server: exec id, the command's pid
  kExecFailed = 4,  // agent -> server: exec id, errno, step
  kDone = 5,        // agent -> server: AgentDone
  // server -> agent: exec id, AgentSignal. Unknown or ended ids: ignored.
  kSignal = 6,
  // server -> agent: channel, rlimit_fsize. The agent forks a file worker
  // (file_wire.h's protocol) whose socket is that channel; it ends at the
  // channel's EOF. Answered by kExecFailed (with the channel as id) if the
  // fork fails, else nothing.
  kFiles = 7,
  // both ways: channel, bytes. Credit for bytes taken off that channel.
  kCredit = 8,
  // both ways: channel. The sender has closed its descriptor of the channel
  // (it will neither read nor write it again); the receiver closes its own.
  kClose = 9,
  // server -> agent: request id. Answered by kUsage: request id, processes
  // in the container, bytes used on /workspace's filesystem.
  kUsageQuery = 10,
  kUsage = 11,
  // agent -> server: exec or listener id, channel. A connection to the
  // exec's listener (AgentExec::listen_port) or to a kListen listener (or a
  // datagram to a kDns one) was accepted and is now that channel (picked by
  // the agent from the top half of the channel space: kAgentChannelBase up).
  kAccepted = 12,
  // server -> agent: exec id, (cols << 16) | rows. A terminal's new size
  // (AgentExec::pty_rows); other or ended ids: ignored.
  kResize = 13,
  // server -> agent: listener id (from the server's id space), (kind << 16)
  // | port (ListenKind). A listener for the whole sandbox on 127.0.0.1:port
  // in the container's network namespace (issue 19's proxies): anyone in
  // the container may connect, each connection comes back as kAccepted
  // with this id. Answered by kListening (id, the bound port) or
  // kExecFailed (id, errno, step). Lives as long as the stream.
  kListen = 14,
  kListening = 15,
};

enum class ListenKind : std::uint32_t {
  kTcp = 0,
  // TCP on the port, and UDP on the same port: each datagram becomes a
  // channel (kAccepted, this id) carrying it in DNS-over-TCP framing
  // (u16 big-endian length, message); the first framed message back is sent
  // to the datagram's source, then the channel is closed. At most
  // kMaxDnsFlows datagrams in flight; more are dropped (DNS retries).
  kDns = 1,
};
inline constexpr std::size_t kMaxDnsFlows = 64;
// Connections a kListen listener queues before the agent accepts them.
inline constexpr int kListenBacklog = 512;

// Channels the agent opens itself (accepted connections) start here, so the
// two sides never pick the same number.
inline constexpr std::uint32_t kAgentChannelBase = 0x8000'0000u;

enum class AgentSignal : std::uint32_t {
  kCancel = 1,     // SIGKILL to the command's whole process group (session)
  kInterrupt = 2,  // SIGINT to the command's main process
};

struct AgentExec {
  std::uint32_t id = 0;           // server-chosen, unique on the stream
  std::vector<std::string> argv;  // argv[0] is looked up in PATH if it has no '/'
  std::vector<std::string> env;   // "KEY=value", the whole environment
  std::string cwd;
  std::uint64_t timeout_ms = 0;     // 0: none (the server's backstop only)
  std::uint64_t rlimit_nofile = 0;  // 0: leave as is
  std::uint64_t rlimit_fsize = 0;
  std::uint64_t rlimit_nproc = 0;
  std::uint64_t rlimit_data = 0;
  // Channels of the command's fds 0, 1, 2 and 3; 0: /dev/null (fd 3: none).
  std::uint32_t ch_stdin = 0;
  std::uint32_t ch_stdout = 0;
  std::uint32_t ch_stderr = 0;
  std::uint32_t ch_fd3 = 0;  // a socket (SOCK_STREAM) in the command
  // Nonzero: a TCP listener on 127.0.0.1:listen_port while the command
  // runs; each connection becomes a channel (kAccepted).
  std::uint16_t listen_port = 0;
  // ExecRequest::shell_env: the command also gets PWD (its working
  // directory as getcwd has it), SHLVL=0 and _ (the path execve ran), as
  // bash gives a program it runs.
  bool shell_env = false;
  // Nonzero rows: a terminal (issue 18). The agent opens a pty pair in the
  // container; the slave is the command's controlling tty and fds 0-2, the
  // master is channel ch_stdin, both ways (ch_stdout, ch_stderr and ch_fd3
  // must be 0).
  std::uint16_t pty_cols = 0;
  std::uint16_t pty_rows = 0;
};

enum class AgentEnd : std::uint32_t { kExited = 0, kTimeout = 1, kCancelled = 2 };

struct AgentDone {
  std::uint32_t id = 0;
  std::int32_t wait_status = 0;  // as from wait4
  AgentEnd end = AgentEnd::kExited;
  std::uint64_t cpu_us = 0;  // user + system of the command and its waited-for children
  std::uint64_t maxrss_kib = 0;
};

struct AgentFailure {
  std::uint32_t id = 0;
  std::int32_t err = 0;
  std::string step;  // "execve", "chdir", "fork"
};

// One frame's header; `length` as given (the reader checks it against its
// limit before reading the payload).
struct FrameHeader {
  std::uint32_t channel = 0;
  std::uint32_t length = 0;
};
std::string encode_frame(std::uint32_t channel, std::string_view payload);
FrameHeader decode_frame_header(const char (&bytes)[kFrameHeader]);

// Control payloads. Every decoder is bounds-checked and rejects trailing
// bytes; argv/env counts and string sizes are bounded by the frame size.
std::string encode_hello(std::uint32_t pid);
std::string encode_exec(const AgentExec& e);
std::string encode_started(std::uint32_t id, std::uint32_t pid);
std::string encode_failure(const AgentFailure& f);
std::string encode_done(const AgentDone& d);
std::string encode_signal(std::uint32_t id, AgentSignal s);
std::string encode_files(std::uint32_t channel, std::uint64_t rlimit_fsize);
std::string encode_credit(std::uint32_t channel, std::uint32_t bytes);
std::string encode_close(std::uint32_t channel);
std::string encode_usage_query(std::uint32_t request);
std::string encode_usage(std::uint32_t request, std::uint32_t processes, std::uint64_t disk_bytes);
std::string encode_accepted(std::uint32_t id, std::uint32_t channel);
std::string encode_resize(std::uint32_t id, std::uint16_t cols, std::uint16_t rows);
std::string encode_listen(std::uint32_t id, ListenKind kind, std::uint16_t port);
std::string encode_listening(std::uint32_t id, std::uint16_t port);

// A decoded control message: kind, then the fields the kind uses.
struct AgentControl {
  AgentMsg kind = AgentMsg::kHello;
  std::uint32_t a = 0;  // hello: version; exec-related: id; channel msgs: channel; usage: request
  std::uint32_t b = 0;  // hello: pid; started: pid; credit: bytes; signal: AgentSignal;
                        // usage: processes; accepted: channel; resize: cols << 16 | rows;
                        // listen: kind << 16 | port; listening: port
  std::uint64_t c = 0;  // files: rlimit_fsize; usage: disk bytes
  std::optional<AgentExec> exec;
  std::optional<AgentDone> done;
  std::optional<AgentFailure> failure;
};
std::optional<AgentControl> decode_control(std::string_view payload);

}  // namespace sandcastle::sandbox::engine
