#include "sandbox/exec_io.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>

namespace sandcastle::sandbox {

namespace {

// `env` with the request's variables layered over it, as "KEY=value".
Result<std::vector<std::string>> environment(std::map<std::string, std::string> env,
                                             const std::map<std::string, std::string>& request,
                                             const std::string& what) {
  for (const auto& [k, v] : request) {
    if (!valid_env_name(k))
      return Error::make(ErrorCode::kInvalidArgument, what + ": invalid env name '" + k + "'");
    if (v.find('\0') != std::string::npos)
      return Error::make(ErrorCode::kInvalidArgument, what + ": env " + k + " contains NUL");
    env[k] = v;
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

// Allowlist mode: the sandbox has no route out, only the server's proxies on
// its loopback (net/proxy_service.h). Over the base environment, under the
// spec's and the request's, so a user can still point a tool elsewhere.
void add_proxy_env(std::map<std::string, std::string>& env, const SandboxSpec& spec) {
  if (spec.network() != NetworkMode::kAllowList) return;
  const std::string http = "http://127.0.0.1:" + std::to_string(net::kHttpProxyPort);
  const std::string socks = "socks5h://127.0.0.1:" + std::to_string(net::kSocksPort);
  for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"}) env[k] = http;
  for (const char* k : {"ALL_PROXY", "all_proxy"}) env[k] = socks;
  for (const char* k : {"NO_PROXY", "no_proxy"}) env[k] = "localhost,127.0.0.1,::1";
}

}  // namespace

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
  add_proxy_env(env, spec);
  if (req.spec_env)
    for (const auto& [k, v] : spec.env()) env[k] = v;
  auto merged = environment(std::move(env), req.env, "exec");
  if (!merged) return merged.error();
  c.env = std::move(*merged);
  c.cwd = req.cwd.empty() ? spec.workdir() : req.cwd;
  if (c.cwd.front() != '/') c.cwd = spec.workdir() + "/" + c.cwd;
  auto timeout = req.timeout.value_or(spec.limits().exec_timeout);
  if (timeout.count() <= 0)
    return Error::make(ErrorCode::kInvalidArgument, "exec: timeout must be positive");
  c.timeout_ms = static_cast<std::uint64_t>(timeout.count());
  return c;
}

Result<ExecCommand> terminal_command(const TerminalRequest& req, const SandboxSpec& spec) {
  constexpr std::uint64_t kTerminalTimeoutMs = std::uint64_t{30} * 24 * 3600 * 1000;
  if (req.cols == 0 || req.rows == 0)
    return Error::make(ErrorCode::kInvalidArgument, "terminal: cols and rows must be positive");
  ExecCommand c;
  c.argv = req.argv;
  if (c.argv.empty())
    // The image's login shell: bash where it exists, else sh. Asked inside
    // the sandbox (the server never looks at its tree).
    c.argv = {"/bin/sh", "-c", "command -v bash >/dev/null 2>&1 && exec bash -l; exec sh -l"};
  for (const auto& a : c.argv)
    if (a.find('\0') != std::string::npos)
      return Error::make(ErrorCode::kInvalidArgument, "terminal: argument contains NUL");
  if (c.argv[0].empty())
    return Error::make(ErrorCode::kInvalidArgument, "terminal: argv[0] is empty");
  auto env = base_environment();
  add_proxy_env(env, spec);
  for (const auto& [k, v] : spec.env()) env[k] = v;
  env["TERM"] = "xterm-256color";
  auto merged = environment(std::move(env), req.env, "terminal");
  if (!merged) return merged.error();
  c.env = std::move(*merged);
  c.cwd = req.cwd.empty() ? spec.workdir() : req.cwd;
  if (c.cwd.front() != '/') c.cwd = spec.workdir() + "/" + c.cwd;
  c.timeout_ms = kTerminalTimeoutMs;
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
