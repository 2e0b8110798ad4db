#include "fixture.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

#include "common/unique_fd.h"
#include "sandbox/native/fs_util.h"

extern char** environ;

namespace sandcastle::sandbox::testing {
namespace {

std::mutex images_mu;
std::map<std::string, native::ImageRoot>& test_images() {
  static std::map<std::string, native::ImageRoot> images;
  return images;
}

}  // namespace

namespace {

// cp -rL, from the shell (links followed: the loader is one on the host):
// the tree is large and only needs to be right.
bool copy_into(const std::string& src, const std::string& dst) {
  std::string cmd = "cp -rL '" + src + "' '" + dst + "'";
  return std::system(cmd.c_str()) == 0;
}

struct PythonImage {
  native::ImageRoot image;
  std::string base;
  std::string why;
  ~PythonImage() {
    if (!base.empty()) (void)native::remove_tree(base);
  }
};

}  // namespace

const native::ImageRoot* host_python_image(std::string* why) {
  static std::once_flag once;
  static PythonImage py;
  std::call_once(once, [] {
    char tmpl[] = "/tmp/sc-pyimage-XXXXXX";
    if (!::mkdtemp(tmpl)) {
      py.why = "mkdtemp";
      return;
    }
    py.base = tmpl;
    ::chmod(py.base.c_str(), 0755);
    const std::string l = py.base + "/layer";
    const std::string lib = "/usr/lib/x86_64-linux-gnu/";
    bool ok = true;
    for (const char* d : {"", "/usr", "/usr/bin", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/etc"})
      ok = ok && ::mkdir((l + d).c_str(), 0755) == 0;
    for (auto [target, name] : {std::pair{"usr/bin", "/bin"}, {"usr/lib", "/lib"}, {"usr/lib64", "/lib64"},
                                {"python3.11", "/usr/bin/python3"}, {"busybox", "/usr/bin/sh"}})
      ok = ok && ::symlink(target, (l + name).c_str()) == 0;
    ok = ok && copy_into("/usr/bin/python3.11", l + "/usr/bin/") && copy_into("/bin/busybox", l + "/usr/bin/") &&
         copy_into("/usr/lib/python3.11", l + "/usr/lib/") &&
         copy_into("/lib64/ld-linux-x86-64.so.2", l + "/usr/lib64/");
    // A setuid binary (the store strips the bit; an image made otherwise
    // may have one): the overlay is nosuid, so it gains nothing.
    ok = ok && copy_into("/usr/bin/su", l + "/usr/bin/") && ::chmod((l + "/usr/bin/su").c_str(), 04755) == 0;
    for (const char* so : {"libc.so.6", "libm.so.6", "libz.so.1", "libexpat.so.1", "libffi.so.8"})
      ok = ok && copy_into(lib + so, l + "/usr/lib/x86_64-linux-gnu/");
    for (const char* applet : {"cat", "ls", "echo", "id", "rm", "touch", "mkdir", "head"})
      ok = ok && ::symlink("busybox", (l + "/usr/bin/" + applet).c_str()) == 0;
    ok = ok && std::system(("echo ID=sandcastle-python-test > '" + l + "/etc/os-release'").c_str()) == 0;
    if (!ok) {
      py.why = "could not build the python image under " + py.base;
      return;
    }
    py.image.name = "py-host";
    py.image.id = "sha256:test-py-host";
    py.image.layers = {l};
    py.image.languages = {"python", "sh"};
    add_test_image(py.image);
  });
  if (why) *why = py.why;
  return py.why.empty() ? &py.image : nullptr;
}

void add_test_image(native::ImageRoot image) {
  std::lock_guard lock(images_mu);
  test_images()[image.name] = std::move(image);
}

native::NativeBackend* shared_backend(std::string* why) {
  static std::once_flag once;
  static std::unique_ptr<native::NativeBackend> backend;
  static std::string reason;
  std::call_once(once, [] {
    // A fixed pool of two (the default floor, never grown): the suites'
    // counts of processes and cgroups stay what they were written for.
    native::NativeBackendOptions options;
    options.pool.min = 2;
    options.pool.max = 2;
    options.images = [](const std::string& ref) -> Result<native::ImageRoot> {
      std::lock_guard lock(images_mu);
      auto it = test_images().find(ref);
      if (it == test_images().end()) return Error::make(ErrorCode::kNotFound, "no image '" + ref + "'");
      return it->second;
    };
    auto b = native::NativeBackend::create(options);
    if (b) {
      backend = std::move(*b);
    } else {
      reason = b.error().message();
    }
  });
  if (why) *why = reason;
  return backend.get();
}

void SandboxTest::SetUp() {
  std::string why;
  backend_ = shared_backend(&why);
  ASSERT_NE(backend_, nullptr) << "native backend unavailable: " << why;
  sb_ = make();
  ASSERT_NE(sb_, nullptr);
}

void SandboxTest::TearDown() {
  if (sb_) {
    EXPECT_TRUE(sb_->destroy().ok());
  }
}

std::unique_ptr<Sandbox> SandboxTest::make(SpecOptions options) {
  auto spec = SandboxSpec::create(std::move(options));
  EXPECT_TRUE(spec.ok()) << spec.error().message();
  if (!spec) return nullptr;
  auto sb = backend_->create(*spec);
  EXPECT_TRUE(sb.ok()) << sb.error().message();
  if (!sb) return nullptr;
  return std::move(*sb);
}

ExecResult SandboxTest::run(const std::vector<std::string>& argv, const std::string& stdin_data,
                            std::chrono::milliseconds timeout) {
  ExecRequest req;
  req.argv = argv;
  req.stdin_data = stdin_data;
  req.timeout = timeout;
  auto r = sb_->exec(req);
  EXPECT_TRUE(r.ok()) << r.error().message();
  return r ? *r : ExecResult{};
}

ExecResult SandboxTest::sh(const std::string& script, std::chrono::milliseconds timeout) {
  return run({"/bin/sh", "-c", script}, {}, timeout);
}

ExecResult SandboxTest::py(const std::string& code, std::chrono::milliseconds timeout) {
  return run({"/usr/bin/python3", "-c", code}, {}, timeout);
}

bool SandboxTest::cgroups() const { return backend_->capabilities().cgroup_limits; }
bool SandboxTest::root() const { return ::geteuid() == 0; }

ChildRun run_tests_in_child(const std::string& filter, const char* env_name) {
  ChildRun run;
  std::string log = ::testing::TempDir() + std::string(env_name) + ".log";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  std::string filter_arg = "--gtest_filter=" + filter;
  char* argv[] = {const_cast<char*>("/proc/self/exe"), filter_arg.data(), nullptr};
  std::vector<std::string> env_strings{std::string(env_name) + "=1"};
  for (char** e = environ; *e; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&run.pid, "/proc/self/exe", &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn: " << rc;
    return run;
  }
  if (::waitpid(run.pid, &run.status, 0) != run.pid) ADD_FAILURE() << "waitpid: " << errno;
  run.out = native::read_small_file(log);
  ::unlink(log.c_str());
  return run;
}

std::vector<pid_t> proc_pids() {
  std::vector<pid_t> out;
  for (const auto& name : native::list_dir("/proc"))
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
      out.push_back(static_cast<pid_t>(std::stoi(name)));
  return out;
}

namespace {

// A host /proc file's first line, read with read(2): a process that exits
// between the open and the read makes it fail (ESRCH), not throw.
std::string first_line(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  char buf[512];
  ssize_t n = ::read(fd.get(), buf, sizeof buf);
  if (n <= 0) return {};
  std::string s(buf, static_cast<std::size_t>(n));
  return s.substr(0, s.find('\n'));
}

// Field 3 (state) and 4 (ppid) of /proc/<pid>/stat, after the command name.
bool state_and_parent(pid_t pid, char* state, pid_t* ppid) {
  const std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 > stat.size()) return false;
  *state = stat[close + 2];
  *ppid = static_cast<pid_t>(std::atol(stat.c_str() + close + 4));
  return true;
}

}  // namespace

std::vector<pid_t> host_descendants(pid_t pid) {
  std::map<pid_t, std::vector<pid_t>> kids;
  for (pid_t p : proc_pids()) {
    char state = 0;
    pid_t ppid = 0;
    if (state_and_parent(p, &state, &ppid)) kids[ppid].push_back(p);
  }
  std::vector<pid_t> out, todo{pid};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    for (pid_t k : kids[p]) {
      out.push_back(k);
      todo.push_back(k);
    }
  }
  return out;
}

char host_state(pid_t pid) {
  char state = 0;
  pid_t ppid = 0;
  return state_and_parent(pid, &state, &ppid) ? state : 0;
}

std::string host_comm(pid_t pid) {
  return first_line("/proc/" + std::to_string(pid) + "/comm");
}

}  // namespace sandcastle::sandbox::testing
