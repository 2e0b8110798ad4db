// The service layer against the world (net_world.h): a ProxyService asking
// the world's resolver, a SandboxManager serving through it, and helpers to
// run commands in a sandbox and read its refusals. Shared by the allowlist
// and full-mode suites.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "../integration/sandbox/fixture.h"
#include "net/proxy_service.h"
#include "net_world.h"
#include "service/lifecycle.h"
#include "service/network.h"

namespace sandcastle::nettest {

class ServiceWorldTest : public ::testing::Test {
 protected:
  // `modes`: what the server offers callers.
  void start(std::vector<net::Mode> modes) {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    ASSERT_NE(backend_, nullptr) << why;
    auto proxies = net::ProxyService::start({.resolver = NetWorld::kResolver});
    ASSERT_TRUE(proxies.ok()) << proxies.error().message();
    proxies_ = std::move(*proxies);
    service::ManagerOptions o;
    o.proxies = proxies_.get();
    manager_ = std::make_unique<service::SandboxManager>(*backend_, o);
    service::Config config;
    config.network_modes = std::move(modes);
    env_ = std::make_unique<service::Env>(service::Env{*manager_, config});
    manager_->start();
  }
  void TearDown() override {
    if (manager_) manager_->shutdown();
    manager_.reset();
    proxies_.reset();
  }

  std::shared_ptr<service::SandboxEntry> entry(const std::string& id) {
    auto e = manager_->get(id, caller_.owner);
    EXPECT_TRUE(e.ok());
    return e.ok() ? *e : nullptr;
  }
  sandbox::ExecResult run(const std::string& id, std::vector<std::string> argv) {
    sandbox::ExecRequest req;
    req.argv = std::move(argv);
    req.timeout = std::chrono::seconds(30);
    auto r = entry(id)->sandbox().exec(req);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? *r : sandbox::ExecResult{};
  }
  sandbox::ExecResult sh(const std::string& id, const std::string& script) {
    return run(id, {"/bin/sh", "-c", script});
  }
  // The reasons of the sandbox's last refusals, oldest first.
  std::vector<std::string> reasons(const std::string& id) {
    std::vector<std::string> out;
    for (const auto& r : entry(id)->network()->last_refusals())
      out.push_back(net::reason_name(r.reason));
    return out;
  }

  sandbox::native::NativeBackend* backend_ = nullptr;
  std::unique_ptr<net::ProxyService> proxies_;
  std::unique_ptr<service::SandboxManager> manager_;
  std::unique_ptr<service::Env> env_;
  const service::Caller caller_{"alice", "k-alice"};
};

}  // namespace sandcastle::nettest
