#include "service/kernel_driver_files.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include <spdlog/spdlog.h>

#include "common/unique_fd.h"
#include "service/kernel_sources.h"

namespace sandcastle::service {

namespace {

constexpr const char* kPythonDriver = "python_driver.py";
constexpr const char* kPythonDriverPyc = "python_driver.pyc";
constexpr const char* kNodeDriver = "node_driver.js";

// Compiles argv[2] (the source) as file argv[1] and writes the .pyc on
// stdout: the header Python checks when it runs a .pyc directly (magic,
// flags, source mtime and size), then the marshalled code.
constexpr const char* kCompileScript =
    "import marshal, sys\n"
    "from importlib.util import MAGIC_NUMBER\n"
    "src = sys.argv[2].encode()\n"
    "code = compile(src, sys.argv[1], 'exec', dont_inherit=True)\n"
    "sys.stdout.buffer.write(MAGIC_NUMBER + bytes(8) + (len(src) & 0xFFFFFFFF).to_bytes(4, 'little')"
    " + marshal.dumps(code))\n";

std::string shared_path(const char* name) { return std::string(sandbox::kSharedDir) + "/" + name; }

}  // namespace

Result<std::string> run_host_command(const std::vector<std::string>& argv, int timeout_ms) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return Error::from_errno("pipe for " + argv.at(0));
  UniqueFd out_r(out[0]), out_w(out[1]);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out_w.get(), 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char env_path[] = "PATH=/usr/bin:/bin";
  char env_lang[] = "LC_ALL=C.UTF-8";
  char* envp[] = {env_path, env_lang, nullptr};
  pid_t pid = -1;
  int rc = ::posix_spawn(&pid, args[0], &fa, &attr, args.data(), envp);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return Error::from_errno("start " + argv[0], rc);
  out_w.reset();

  std::string output;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  while (out_r) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p {out_r.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) continue;
    char buf[65536];
    ssize_t n = ::read(out_r.get(), buf, sizeof buf);
    if (n > 0) output.append(buf, static_cast<std::size_t>(n));
    else if (n == 0 || errno != EINTR) out_r.reset();
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return Error::make(ErrorCode::kTimeout, argv[0] + " did not finish in time");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error::make(ErrorCode::kInternal, argv[0] + " failed (status " + std::to_string(status) + ")");
  return output;
}

const std::optional<std::string>& python_driver_pyc() {
  static std::once_flag once;
  static std::optional<std::string> pyc;
  std::call_once(once, [] {
    if (::access("/usr/bin/python3", X_OK) != 0) return;
    auto r = run_host_command({"/usr/bin/python3", "-I", "-S", "-B", "-c", kCompileScript, shared_path(kPythonDriver),
                               std::string(python_driver_source())},
                              30'000);
    if (r.ok() && r->size() > 16) {
      pyc = std::move(r).value();
    } else {
      spdlog::warn("python kernel driver: no precompiled driver ({}); kernels compile it at start",
                   r.ok() ? "empty output" : r.error().message());
    }
  });
  return pyc;
}

Result<std::string> place_kernel_driver(sandbox::Sandbox& sb, KernelLanguage lang) {
  const bool py = lang == KernelLanguage::kPython;
  const char* name = py ? kPythonDriver : kNodeDriver;
  const std::string_view source = py ? python_driver_source() : node_driver_source();
  const std::optional<std::string>* pyc = py ? &python_driver_pyc() : nullptr;
  const bool use_pyc = pyc && pyc->has_value();
  const std::string run_name = use_pyc ? kPythonDriverPyc : name;

  const std::string shared = shared_path(run_name.c_str());
  if (sb.has_shared(run_name)) return shared;
  Status st = sb.publish_shared(name, source);
  if (st.ok() && use_pyc) st = sb.publish_shared(kPythonDriverPyc, **pyc);
  if (st.ok()) return shared;
  if (st.error().code != ErrorCode::kUnavailable) return st.error();

  // No shared directory: a copy of the sandbox's own.
  const std::string own = std::string(kKernelDir) + "/" + run_name;
  if (sb.stat(own).ok()) return own;
  if (auto s = sb.mkdir(kKernelDir, true); !s.ok()) return s.error();
  if (auto s = sb.write_file(own, use_pyc ? std::string_view(**pyc) : source, 0444); !s.ok()) return s.error();
  return own;
}

}  // namespace sandcastle::service
