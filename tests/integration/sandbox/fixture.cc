#include "fixture.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>

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

}  // namespace sandcastle::sandbox::testing
