// The server's side of an exec that both backends share: checking and
// layering the request into argv/env/cwd/timeout, pumping a command's
// output into its capped buffer and callback, and filling the result from
// what was kept. How the request reaches the sandbox, and how its end comes
// back, is each backend's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "common/unique_fd.h"
#include "sandbox/output_buffer.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox {

// What every backend sends for an ExecRequest.
struct ExecCommand {
  std::vector<std::string> argv;
  std::vector<std::string>
      env;          // "KEY=value": base, then the spec's (if asked), then the request's
  std::string cwd;  // absolute
  std::uint64_t timeout_ms = 0;  // > 0
};

// kInvalidArgument for an empty argv, a NUL in an argument or a value, an
// invalid variable name, or a timeout that is not positive.
Result<ExecCommand> exec_command(const ExecRequest& req, const SandboxSpec& spec);

// What every backend runs for a TerminalRequest: the image's login shell when
// argv is empty, TERM=xterm-256color, a 30-day backstop timeout (the REST
// layer closes idle terminals sooner). kInvalidArgument as exec_command, and
// for a zero size.
Result<ExecCommand> terminal_command(const TerminalRequest& req, const SandboxSpec& spec);

// One of a command's output streams, read without blocking.
struct OutputStream {
  UniqueFd fd;  // O_NONBLOCK
  OutputBuffer buf;
  const std::function<void(std::string_view)>* callback = nullptr;
};

// Reads what is available into the buffer and the callback; at EOF (or an
// error) closes the fd and returns false.
bool pump(OutputStream& s);

// Duration, output (kept, truncated, totals) and exit code or signal of
// `wait_status`; the caller sets the reason.
void fill_result(ExecResult& res, OutputStream& out, OutputStream& err, int wait_status,
                 std::chrono::steady_clock::time_point start);

}  // namespace sandcastle::sandbox
