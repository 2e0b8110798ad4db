// The service layer against the world (net_world.h): a ProxyService asking
// the world's resolver, a SandboxManager serving through it, and helpers to
// run commands in a sandbox and read its refusals. Shared by the allowlist
// and full-mode suites.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "../integration/sandbox/fixture.h"
#include "net/proxy_service.h"
#include "net_world.h"
#include "service/lifecycle.h"
#include "service/network.h"

namespace sandcastle::nettest {

// The server's pieces: proxies on the world's resolver, a manager serving
// through them, the service env, one caller. Also used without gtest's
// fixture (the hostile suites keep one per suite).
struct ServiceServer {
  ServiceServer() = default;
  ServiceServer(const ServiceServer&) = delete;
  ServiceServer& operator=(const ServiceServer&) = delete;
  ~ServiceServer() { stop(); }

  // `modes`: what the server offers callers (empty: the config's default).
  Status start(std::vector<net::Mode> modes, net::ProxyOptions popts = {}) {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (backend_ == nullptr) return Error::make(ErrorCode::kUnavailable, why);
    popts.resolver = NetWorld::kResolver;
    auto proxies = net::ProxyService::start(popts);
    if (!proxies.ok()) return proxies.take_error();
    proxies_ = std::move(*proxies);
    service::ManagerOptions o;
    o.proxies = proxies_.get();
    o.reap_interval = reap_interval_;
    manager_ = std::make_unique<service::SandboxManager>(*backend_, o);
    service::Config config;
    if (!modes.empty()) config.network_modes = std::move(modes);
    env_ = std::make_unique<service::Env>(service::Env{*manager_, config});
    manager_->start();
    return ok_status();
  }
  void stop() {
    if (manager_) manager_->shutdown();
    manager_.reset();
    proxies_.reset();
  }

  // create_sandbox with `args`; the new sandbox's id.
  Result<std::string> create(const nlohmann::json& args) {
    auto r = service::create_sandbox(*env_, caller_, args);
    if (!r.ok()) return r.take_error();
    return std::string((*r)["sandbox_id"]);
  }
  std::shared_ptr<service::SandboxEntry> entry(const std::string& id) {
    auto e = manager_->get(id, caller_.owner);
    if (!e.ok()) throw std::runtime_error("no sandbox " + id + ": " + e.error().message());
    return *e;
  }
  sandbox::ExecResult run(const std::string& id, std::vector<std::string> argv) {
    sandbox::ExecRequest req;
    req.argv = std::move(argv);
    req.timeout = std::chrono::seconds(60);
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

  // How often the manager's thread reaps and tends full networks
  // (SandboxManager::tend_networks); set before start.
  std::chrono::seconds reap_interval_{5};
  sandbox::native::NativeBackend* backend_ = nullptr;
  std::unique_ptr<net::ProxyService> proxies_;
  std::unique_ptr<service::SandboxManager> manager_;
  std::unique_ptr<service::Env> env_;
  service::Caller caller_{"alice", "k-alice"};
};

class ServiceWorldTest : public ::testing::Test, protected ServiceServer {
 protected:
  void start(std::vector<net::Mode> modes,
             std::chrono::seconds reap_interval = std::chrono::seconds(5)) {
    reap_interval_ = reap_interval;
    auto s = ServiceServer::start(std::move(modes));
    ASSERT_TRUE(s.ok()) << s.error().message();
  }
  void TearDown() override { stop(); }
};

}  // namespace sandcastle::nettest
