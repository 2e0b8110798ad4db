// MCP over stdio: one JSON-RPC message per line on stdin and stdout. stdout
// carries protocol messages only; everything else goes to stderr.
#pragma once

#include <chrono>
#include <cstddef>

#include "mcp/server.h"

namespace sandcastle::transport {

struct StdioOptions {
  // Room for the largest file write (32 MiB) in base64 with its envelope.
  size_t max_line_bytes = size_t{64} * 1024 * 1024;
  // After stdin closes or a signal: how long in-flight requests may run on to
  // answer, then how long cancelled ones get to unwind (total stays < 2 s).
  std::chrono::milliseconds finish_grace{1000};
  std::chrono::milliseconds cancel_grace{700};
  int in_fd = 0;
  int out_fd = 1;
};

// Blocks SIGTERM and SIGINT (they are then read from a signalfd) and ignores
// SIGPIPE. Call before starting any thread: a thread created earlier keeps the
// signals unblocked and would take the default action — death.
void block_termination_signals();

// Serves until stdin reaches EOF or SIGTERM/SIGINT arrives, then cancels what
// is still running. Returns the process exit code (0 on a clean shutdown).
int serve_stdio(const mcp::Server& server, const StdioOptions& options);

}  // namespace sandcastle::transport
