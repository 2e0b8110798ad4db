// What the engine backend's tests share (engine_backend_test.cc,
// remote_engine_test.cc, multi_engine_test.cc): the spec their sandboxes are
// made from, a backend's options for a test engine, and a fixture that owns
// the backend under test (shut down after each test) and makes sandboxes and
// runs commands in them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine_fixture.h"
#include "sandbox/engine/engine_backend.h"

namespace sandcastle::sandbox::engine::testing {

// `image`, 256 MiB of memory, 16 MiB of disk, 20 s per command.
inline SandboxSpec test_spec(const std::string& image = "host") {
  SpecOptions o;
  o.image = image;
  o.limits.memory_bytes = 256 * kMiB;
  o.limits.disk_bytes = 16 * kMiB;
  o.limits.exec_timeout = std::chrono::seconds(20);
  return *SandboxSpec::create(o);
}

// An engine backend on `url` with the built agent and no warm pool (a
// test's creates are its own unless it asks for one).
inline EngineBackendOptions backend_options(const std::string& url,
                                            const std::string& tls_dir = {}) {
  EngineBackendOptions o;
  o.engine.url = url;
  o.engine.tls_dir = tls_dir;
  o.agent_path = find_agent();
  o.pool_size = 0;
  return o;
}

// B: EngineBackend or MultiEngineBackend; Base: ::testing::Test or
// ::testing::TestWithParam<...>.
template <typename B, typename Base = ::testing::Test>
class BackendTest : public Base {
 protected:
  void TearDown() override {
    if (backend_) backend_->shutdown();
  }
  // The backend under test (a previous one is shut down first). A failure
  // is fatal to the test: callers in a test body wrap it in
  // ASSERT_NO_FATAL_FAILURE.
  void use(Result<std::unique_ptr<B>> b) {
    if (backend_) backend_->shutdown();
    backend_.reset();
    ASSERT_TRUE(b.ok()) << b.error().message();
    backend_ = std::move(*b);
  }
  std::unique_ptr<Sandbox> make(const SandboxSpec& spec) {
    if (!backend_) {
      ADD_FAILURE() << "no backend";
      return nullptr;
    }
    auto sb = backend_->create(spec);
    EXPECT_TRUE(sb.ok()) << sb.error().message();
    return sb.ok() ? std::move(*sb) : nullptr;
  }
  std::unique_ptr<Sandbox> make() { return make(spec_); }
  // `argv` to its end; output kept whole up to 1 MiB (or stdin's size).
  ExecResult run(Sandbox& sb, std::vector<std::string> argv, std::string stdin_data = {}) {
    ExecRequest req;
    req.argv = std::move(argv);
    req.stdin_data = std::move(stdin_data);
    req.output.max_bytes = std::max(req.output.max_bytes, req.stdin_data.size() + 4096);
    auto r = sb.exec(req);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : ExecResult{};
  }

  SandboxSpec spec_ = test_spec();  // make()'s
  std::unique_ptr<B> backend_;
};

}  // namespace sandcastle::sandbox::engine::testing
