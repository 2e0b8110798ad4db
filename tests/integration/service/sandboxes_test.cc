// The service facade against the real native backend: what the REST API and
// the console call. Create / list / get / close with ownership, the event
// feed, a run's streamed output, interrupting a run, and files.
#include "service/sandboxes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <mutex>

#include "../sandbox/fixture.h"
#include "common/metrics.h"
#include "mcp/protocol.h"
#include "mcp/server.h"
#include "service/history.h"
#include "service/lifecycle.h"
#include "service/run_env.h"
#include "tools/tool_env.h"

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

class SandboxesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
    manager_ = std::make_unique<SandboxManager>(*backend_, ManagerOptions{});
    env_ = std::make_unique<tools::ToolEnv>(tools::ToolEnv{*manager_, tools::ToolConfig{}});
    tools::register_sandbox_tools(server_, *env_);
    svc_ = std::make_unique<Sandboxes>(*env_);
    manager_->start();
  }
  void TearDown() override {
    svc_.reset();
    if (manager_) manager_->shutdown();
    manager_.reset();
  }
  std::string create(const Caller& c, json args = json::object()) {
    auto r = svc_->create(c, args);
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? (*r)["sandbox_id"].get<std::string>() : std::string();
  }

  sandbox::Backend* backend_ = nullptr;
  std::unique_ptr<SandboxManager> manager_;
  std::unique_ptr<tools::ToolEnv> env_;
  mcp::Server server_;
  std::unique_ptr<Sandboxes> svc_;
  const Caller alice_{"alice", "k-alice"};
  const Caller bob_{"bob", "k-bob"};
};

TEST_F(SandboxesTest, LifecycleIsPerOwner) {
  const std::string id = create(alice_, json{{"language", "bash"}, {"name", "work"}});
  ASSERT_FALSE(id.empty());
  auto mine = svc_->list(alice_);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_EQ(mine[0]["sandbox_id"], id);
  EXPECT_EQ(mine[0]["owner"], "alice");
  EXPECT_TRUE(svc_->list(bob_).empty());

  auto got = svc_->get(alice_, "work");
  ASSERT_TRUE(got.ok()) << got.error().message();
  EXPECT_EQ((*got)["status"], "running");
  ASSERT_TRUE(got->contains("usage"));
  // Memory is read from the sandbox's cgroup, which an unprivileged server may not have.
  if (::geteuid() == 0) {
    EXPECT_GT((*got)["usage"]["memory_bytes"].get<std::uint64_t>(), 0u);
  }

  // Another owner's sandbox is not found, exactly as a missing one.
  auto theirs = svc_->get(bob_, id);
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.error().code, ErrorCode::kNotFound);
  auto closed_by_bob = svc_->close(bob_, id);
  ASSERT_FALSE(closed_by_bob.ok());
  EXPECT_EQ(closed_by_bob.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(svc_->list(alice_).size(), 1u);

  // Bad arguments are refused by the tool's schema, nothing created.
  auto bad = svc_->create(alice_, json{{"limits", {{"memory_mb", 1}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(svc_->list(alice_).size(), 1u);

  auto closed = svc_->close(alice_, id);
  ASSERT_TRUE(closed.ok()) << closed.error().message();
  EXPECT_EQ((*closed)["closed"], true);
  EXPECT_TRUE(svc_->list(alice_).empty());
}

TEST_F(SandboxesTest, EventFeedSeesCreateAndClose) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<SandboxEvent> seen;
  std::unique_ptr<SandboxEvents::Subscription> sub;
  sub = svc_->events().subscribe(std::string("alice"), [&] { cv.notify_all(); });
  auto bob_sub = svc_->events().subscribe(std::string("bob"), [] {});
  auto wait_for = [&](size_t n) {
    std::unique_lock l(mu);
    return cv.wait_for(l, 10s, [&] {
      for (auto& e : sub->drain().events) seen.push_back(std::move(e));
      return seen.size() >= n;
    });
  };
  const std::string id = create(alice_, json{{"language", "bash"}});
  ASSERT_TRUE(wait_for(1));
  EXPECT_EQ(seen[0].kind, SandboxEvent::Kind::kCreated);
  EXPECT_EQ(seen[0].sandbox_id, id);
  EXPECT_EQ(seen[0].sandbox["status"], "running");
  EXPECT_EQ(seen[0].sandbox["owner"], "alice");
  std::size_t n = 1;
  auto paused = svc_->pause(alice_, id);
  if (::geteuid() == 0) {  // freezing needs the sandbox's cgroup
    ASSERT_TRUE(paused.ok()) << paused.error().message();
    ASSERT_TRUE(wait_for(2));
    EXPECT_EQ(seen[1].kind, SandboxEvent::Kind::kChanged);
    EXPECT_EQ(seen[1].sandbox["status"], "paused");
    n = 2;
  } else {
    ASSERT_FALSE(paused.ok());  // "the sandbox has no cgroup to freeze": nothing changed
  }
  ASSERT_TRUE(svc_->close(alice_, id).ok());
  ASSERT_TRUE(wait_for(n + 1));
  EXPECT_EQ(seen[n].kind, SandboxEvent::Kind::kRemoved);
  EXPECT_EQ(seen[n].sandbox_id, id);
  // A one-shot run's sandbox is nobody's to list: no events.
  auto one = svc_->run_code(alice_, json{{"code", "echo hi"}, {"language", "bash"}});
  ASSERT_TRUE(one.ok()) << one.error().message();
  EXPECT_TRUE(bob_sub->drain().events.empty());
  std::this_thread::sleep_for(100ms);  // nothing to wait for: the absence of an event
  EXPECT_TRUE(sub->drain().events.empty());
}

// A sandbox made and closed while the watcher is busy reaches it as one
// notice batch, after it has gone: subscribers still see it come and go.
TEST_F(SandboxesTest, EventFeedKeepsASandboxThatCameAndWentInOneBatch) {
  std::mutex mu;
  std::condition_variable cv;
  bool held = false, release = false;
  // The wake runs on the watcher's thread: holding it there holds the watcher.
  std::vector<SandboxEvent> seen;
  std::unique_ptr<SandboxEvents::Subscription> sub;
  sub = svc_->events().subscribe(std::string("alice"), [&] {
    std::unique_lock l(mu);
    if (!held) {
      held = true;
      cv.notify_all();
      cv.wait(l, [&] { return release; });
    }
    cv.notify_all();
  });
  // However the test ends, the watcher is let go (TearDown joins it).
  auto let_go = [&](void*) {
    std::lock_guard g(mu);
    release = true;
    cv.notify_all();
  };
  std::unique_ptr<void, decltype(let_go)> guard(&mu, let_go);
  const std::string first = create(alice_, json{{"language", "bash"}});
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 10s, [&] { return held; }));
  }
  for (auto& e : sub->drain().events) seen.push_back(std::move(e));  // the first: queue empty again
  const std::string brief = create(alice_, json{{"language", "bash"}});
  ASSERT_TRUE(svc_->close(alice_, brief).ok());
  guard.reset();
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, 10s, [&] {
    for (auto& e : sub->drain().events) seen.push_back(std::move(e));
    return seen.size() >= 3;
  }));
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].sandbox_id, first);
  EXPECT_EQ(seen[1].kind, SandboxEvent::Kind::kCreated);
  EXPECT_EQ(seen[1].sandbox_id, brief);
  EXPECT_EQ(seen[1].sandbox["owner"], "alice");
  EXPECT_EQ(seen[2].kind, SandboxEvent::Kind::kRemoved);
  EXPECT_EQ(seen[2].sandbox_id, brief);
}

TEST_F(SandboxesTest, RunStreamsOutputAndInterruptStopsIt) {
  const std::string id = create(alice_, json{{"language", "python"}});
  ASSERT_FALSE(id.empty());
  std::mutex mu;
  std::condition_variable cv;
  std::string out;
  RunOptions opts;
  opts.callbacks.on_output = [&](std::string_view stream, std::string_view text) {
    std::lock_guard l(mu);
    if (stream == "stdout") out += text;
    cv.notify_all();
  };
  auto run = std::async(std::launch::async, [&] {
    return svc_->run_code(alice_,
                          json{{"sandbox_id", id},
                               {"code",
                                "import time\nprint('started', flush=True)\n"
                                "while True: time.sleep(0.05)"},
                               {"timeout_s", 60}},
                          opts);
  });
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 30s, [&] { return out.find("started") != std::string::npos; }));
  }
  auto theirs = svc_->interrupt(bob_, id);
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.error().code, ErrorCode::kNotFound);
  auto intr = svc_->interrupt(alice_, id);
  ASSERT_TRUE(intr.ok()) << intr.error().message();
  EXPECT_TRUE(*intr);
  ASSERT_EQ(run.wait_for(20s), std::future_status::ready);
  auto r = run.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)["reason"], "cancelled");
  EXPECT_EQ((*r)["error"]["name"], "KeyboardInterrupt");
  // The kernel and its state are intact: the next run works.
  auto next = svc_->run_code(alice_, json{{"sandbox_id", id}, {"code", "1 + 1"}});
  ASSERT_TRUE(next.ok()) << next.error().message();
  EXPECT_EQ((*next)["result"]["text/plain"], "2");
  auto idle = svc_->interrupt(alice_, id);
  ASSERT_TRUE(idle.ok());
  EXPECT_FALSE(*idle);
}

TEST_F(SandboxesTest, FilesWriteReadListRemove) {
  const std::string id = create(alice_, json{{"language", "bash"}});
  ASSERT_FALSE(id.empty());
  const std::string bytes("a\0b\xff", 4);
  auto w = svc_->write_file(alice_, id, "dir/data.bin", bytes);
  ASSERT_TRUE(w.ok()) << w.error().message();
  EXPECT_EQ((*w)["size"], 4);
  auto r = svc_->read_file(alice_, id, "dir/data.bin");
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->data, bytes);
  EXPECT_EQ(r->size, 4u);
  auto capped = svc_->read_file(alice_, id, "dir/data.bin", 2);
  ASSERT_FALSE(capped.ok());
  EXPECT_EQ(capped.error().code, ErrorCode::kResourceExhausted);
  auto l = svc_->list_files(alice_, id, "dir");
  ASSERT_TRUE(l.ok()) << l.error().message();
  ASSERT_EQ((*l)["entries"].size(), 1u);
  EXPECT_EQ((*l)["entries"][0]["name"], "data.bin");
  EXPECT_EQ((*l)["entries"][0]["type"], "file");
  EXPECT_FALSE(svc_->read_file(bob_, id, "dir/data.bin").ok());
  auto rm_bob = svc_->remove_file(bob_, id, "dir", true);
  ASSERT_FALSE(rm_bob.ok());
  EXPECT_EQ(rm_bob.error().code, ErrorCode::kNotFound);
  ASSERT_TRUE(svc_->remove_file(alice_, id, "dir", true).ok());
  auto gone = svc_->read_file(alice_, id, "dir/data.bin");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.error().sys_errno, ENOENT);
}

// Several files are one change: a directory in the way of the 2nd leaves
// the 1st and 3rd unwritten (no temp, no directory made); without it all
// three land, replacing what was there.
TEST_F(SandboxesTest, WriteFilesIsAllOrNone) {
  const std::string id = create(alice_, json{{"language", "bash"}});
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(svc_->write_file(alice_, id, "up/busy/keep", "k").ok());
  ASSERT_TRUE(svc_->write_file(alice_, id, "up/a.txt", "old").ok());
  auto refused = svc_->write_files(
      alice_, id, {{"up/a.txt", "new"}, {"up/busy", "x"}, {"up/fresh/c.txt", "c"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, ErrorCode::kSystem);
  EXPECT_EQ(refused.error().sys_errno, EISDIR);
  auto l = svc_->list_files(alice_, id, "up");
  ASSERT_TRUE(l.ok()) << l.error().message();
  std::vector<std::string> names;
  for (const auto& e : (*l)["entries"]) names.push_back(e["name"].get<std::string>());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a.txt", "busy"}));
  EXPECT_EQ(svc_->read_file(alice_, id, "up/a.txt")->data, "old");
  auto all = svc_->write_files(
      alice_, id, {{"up/a.txt", "new"}, {"up/empty", std::string_view()}, {"up/fresh/c.txt", "c"}});
  ASSERT_TRUE(all.ok()) << all.error().message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ(svc_->read_file(alice_, id, "up/a.txt")->data, "new");
  EXPECT_EQ(svc_->read_file(alice_, id, "up/fresh/c.txt")->data, "c");
  EXPECT_EQ(svc_->read_file(alice_, id, "up/empty")->size, 0u);
  const std::string over(svc_->max_file_bytes() + 1, 'x');
  auto too_large = svc_->write_files(alice_, id, {{"up/b.txt", "b"}, {"up/over", over}});
  ASSERT_FALSE(too_large.ok());
  EXPECT_EQ(too_large.error().code, ErrorCode::kResourceExhausted);
  EXPECT_EQ(svc_->read_file(alice_, id, "up/b.txt").error().sys_errno, ENOENT);
}

// The executions metrics are the exec service's own: a run that never went
// through MCP's tools/call (here: the service, as REST calls it) counts.
TEST_F(SandboxesTest, RunsCountInExecutionMetrics) {
  auto& zero = metrics::registry().counter(metrics::name::kExecutions,
                                           "code and command executions, by outcome",
                                           {{"outcome", "exit_zero"}});
  auto& nonzero = metrics::registry().counter(metrics::name::kExecutions,
                                              "code and command executions, by outcome",
                                              {{"outcome", "exit_nonzero"}});
  const double zero0 = zero.value(), nonzero0 = nonzero.value();
  auto ok = svc_->run_code(alice_, json{{"code", "true"}, {"language", "bash"}});
  ASSERT_TRUE(ok.ok()) << ok.error().message();
  auto fail = svc_->run_code(alice_, json{{"code", "exit 3"}, {"language", "bash"}});
  ASSERT_TRUE(fail.ok()) << fail.error().message();
  EXPECT_EQ((*fail)["exit_code"], 3);
  EXPECT_EQ(zero.value(), zero0 + 1);
  EXPECT_EQ(nonzero.value(), nonzero0 + 1);
}

// An MCP client's run (a tools/call, not the service) is interrupted too:
// the console's button stops what an agent started. The MCP request itself
// is not cancelled: its client gets the run's result.
TEST_F(SandboxesTest, InterruptReachesAnMcpClientsRun) {
  const std::string id = create(alice_, json{{"language", "python"}});
  ASSERT_FALSE(id.empty());
  std::mutex mu;
  std::condition_variable cv;
  bool started = false;
  sandcastle::CancelToken request_token;
  mcp::RequestContext ctx(
      [&](const json& msg) {
        if (msg.value("method", "") != "notifications/message") return;
        if (msg["params"]["data"].value("text", "").find("started") == std::string::npos) return;
        std::lock_guard l(mu);
        started = true;
        cv.notify_all();
      },
      json(1), std::nullopt, mcp::Era::kLegacy, "2025-11-25", mcp::log_level_rank("info"),
      &request_token, "alice");
  auto run = std::async(std::launch::async, [&] {
    return server_.tools().call(
        "execute_code",
        json{{"sandbox_id", id},
             {"code", "import time\nprint('started', flush=True)\nwhile True: time.sleep(0.05)"},
             {"timeout_s", 60}},
        ctx);
  });
  {
    std::unique_lock l(mu);
    ASSERT_TRUE(cv.wait_for(l, 30s, [&] { return started; }));
  }
  auto intr = svc_->interrupt(alice_, id);
  ASSERT_TRUE(intr.ok()) << intr.error().message();
  EXPECT_TRUE(*intr);
  ASSERT_EQ(run.wait_for(20s), std::future_status::ready);
  auto res = run.get();
  EXPECT_FALSE(request_token.cancelled());
  ASSERT_TRUE(res.structured.is_object()) << res.to_json().dump();
  EXPECT_EQ(res.structured["reason"], "cancelled");
  EXPECT_EQ(res.structured["error"]["name"], "KeyboardInterrupt");
}

// The lifecycle, history and kernel operations stand without the MCP layer:
// no mcp::Server, no tool registry, only the service's Env. A run recorded by
// the service is read back by the same owner only; close ends it for good.
TEST(ServiceWithoutMcp, LifecycleAndHistoryOfOneSandbox) {
  std::string why;
  auto* backend = sandbox::testing::shared_backend(&why);
  if (!backend) GTEST_SKIP() << "no sandbox backend on this host: " << why;
  SandboxManager manager(*backend, ManagerOptions{});
  manager.start();
  Env env{manager, Config{}};
  env.store = &manager.mutable_store();
  const Caller alice{"alice", "k-alice"}, bob{"bob", "k-bob"};

  CreateRequest req;
  req.language = "bash";
  req.name = "solo";
  req.owner = alice.owner;
  auto made = manager.create(req);
  ASSERT_TRUE(made.ok()) << made.error().message();
  const std::string id = (*made)->id();

  json listed = list_sandboxes(env, alice);
  ASSERT_EQ(listed["count"], 1);
  EXPECT_EQ(listed["sandboxes"][0]["sandbox_id"], id);
  EXPECT_EQ(listed["sandboxes"][0]["name"], "solo");
  EXPECT_EQ(list_sandboxes(env, bob)["count"], 0);

  const auto t0 = std::chrono::steady_clock::now();
  const json args{{"sandbox_id", id}, {"code", "echo hi"}, {"language", "bash"}};
  const json result{{"sandbox_id", id}, {"stdout", "hi\n"},   {"stderr", ""},
                    {"exit_code", 0},   {"reason", "exited"}, {"duration_ms", 1.5}};
  record_run(env, alice.owner, "execute_code", args, RunOutcome{&result, {}, 0}, t0);
  auto page = sandbox_history(env, alice, json{{"sandbox_id", "solo"}});
  ASSERT_TRUE(page.ok()) << page.error().message();
  EXPECT_EQ((*page)["sandbox_id"], id);
  ASSERT_EQ((*page)["count"], 1);
  EXPECT_EQ((*page)["entries"][0]["input"], "echo hi");
  EXPECT_EQ((*page)["entries"][0]["stdout"], "hi\n");
  EXPECT_EQ((*page)["entries"][0]["reason"], "exited");

  // The schema is the service's: checked without the tool registry.
  auto bad = sandbox_history(env, alice, json{{"sandbox_id", id}, {"limit", 0}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("limit"), std::string::npos) << bad.error().message();
  auto theirs = sandbox_history(env, bob, json{{"sandbox_id", id}});
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.error().code, ErrorCode::kNotFound);
  auto close_theirs = close_sandbox(env, bob, id);
  ASSERT_FALSE(close_theirs.ok());
  EXPECT_EQ(close_theirs.error().code, ErrorCode::kNotFound);

  // A bash sandbox has no kernel to restart; another owner's is not found.
  auto no_kernel = restart_kernel(env, alice, id);
  ASSERT_FALSE(no_kernel.ok());
  EXPECT_EQ(no_kernel.error().code, ErrorCode::kInvalidArgument);
  auto restart_theirs = restart_kernel(env, bob, id);
  ASSERT_FALSE(restart_theirs.ok());
  EXPECT_EQ(restart_theirs.error().code, ErrorCode::kNotFound);

  auto closed = close_sandbox(env, alice, "solo");
  ASSERT_TRUE(closed.ok()) << closed.error().message();
  EXPECT_EQ(*closed, (json{{"sandbox_id", id}, {"closed", true}}));
  EXPECT_EQ(list_sandboxes(env, alice)["count"], 0);
  auto again = close_sandbox(env, alice, id);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().code, ErrorCode::kNotFound);
  manager.shutdown();
}

}  // namespace
}  // namespace sandcastle::service
