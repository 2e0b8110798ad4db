#include "fixture.h"

#include <unistd.h>

#include <mutex>

namespace sandcastle::sandbox::testing {

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

}  // namespace sandcastle::sandbox::testing
