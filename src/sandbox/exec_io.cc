#include "sandbox/exec_io.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace sandcastle::sandbox {

Result<ExecCommand> exec_command(const ExecRequest& req, const SandboxSpec& spec) {
  if (req.argv.empty() || req.argv[0].empty())
    return Error::make(ErrorCode::kInvalidArgument, "exec: argv must not be empty");
  ExecCommand c;
  for (const auto& a : req.argv) {
    if (a.find('\0') != std::string::npos)
      return Error::make(ErrorCode::kInvalidArgument, "exec: argument contains NUL");
    c.argv.push_back(a);
  }
  auto env = base_environment();
  if (req.spec_env)
    for (const auto& [k, v] : spec.env()) env[k] = v;
  for (const auto& [k, v] : req.env) {
    if (!valid_env_name(k))
      return Error::make(ErrorCode::kInvalidArgument, "exec: invalid env name '" + k + "'");
    if (v.find('\0') != std::string::npos)
      return Error::make(ErrorCode::kInvalidArgument, "exec: env " + k + " contains NUL");
    env[k] = v;
  }
  for (const auto& [k, v] : env) c.env.push_back(k + "=" + v);
  c.cwd = req.cwd.empty() ? spec.workdir() : req.cwd;
  if (c.cwd.front() != '/') c.cwd = spec.workdir() + "/" + c.cwd;
  auto timeout = req.timeout.value_or(spec.limits().exec_timeout);
  if (timeout.count() <= 0)
    return Error::make(ErrorCode::kInvalidArgument, "exec: timeout must be positive");
  c.timeout_ms = static_cast<std::uint64_t>(timeout.count());
  return c;
}

bool pump(OutputStream& s) {
  char chunk[65536];
  for (;;) {
    ssize_t n = ::read(s.fd.get(), chunk, sizeof chunk);
    if (n > 0) {
      std::string_view v(chunk, static_cast<std::size_t>(n));
      s.buf.append(v);
      if (s.callback && *s.callback) (*s.callback)(v);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    s.fd.reset();
    return false;
  }
}

void fill_result(ExecResult& res, OutputStream& out, OutputStream& err, int wait_status,
                 std::chrono::steady_clock::time_point start) {
  res.duration = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  res.stdout_truncated = out.buf.truncated();
  res.stderr_truncated = err.buf.truncated();
  res.stdout_total = out.buf.total();
  res.stderr_total = err.buf.total();
  res.stdout_data = out.buf.take();
  res.stderr_data = err.buf.take();
  if (WIFEXITED(wait_status)) res.exit_code = WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) res.signal = WTERMSIG(wait_status);
}

}  // namespace sandcastle::sandbox
