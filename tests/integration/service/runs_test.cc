// ServiceWithoutMcp, runs: through the service layer alone (service/runs.h,
// service::Sandboxes), with no mcp::Server in the process's object graph:
// output streamed through the callbacks, a command, interrupt(), the run history, and a one-shot
// run that waits for a slot at the server's cap.
#include "service/runs.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "../sandbox/fixture.h"
#include "service/history.h"
#include "service/sandboxes.h"

namespace sandcastle::service {
namespace {

using namespace std::chrono_literals;

class ServiceWithoutMcpRuns : public ::testing::Test {
 protected:
  void start(ManagerOptions opts = {}) {
    std::string why;
    backend_ = sandbox::testing::shared_backend(&why);
    if (!backend_) GTEST_SKIP() << "no sandbox backend on this host: " << why;
    manager_ = std::make_unique<SandboxManager>(*backend_, opts);
    env_ = std::make_unique<Env>(Env{*manager_, Config{}});
    env_->store = &manager_->mutable_store();
    svc_ = std::make_unique<Sandboxes>(*env_);
    manager_->start();
  }
  void TearDown() override {
    svc_.reset();
    if (manager_) manager_->shutdown();
  }
  std::string create(const std::string& language) {
    auto r = svc_->create(alice_, json{{"language", language}});
    EXPECT_TRUE(r.ok()) << r.error().message();
    return r.ok() ? (*r)["sandbox_id"].get<std::string>() : std::string();
  }

  sandbox::Backend* backend_ = nullptr;
  std::unique_ptr<SandboxManager> manager_;
  std::unique_ptr<Env> env_;
  std::unique_ptr<Sandboxes> svc_;
  const Caller alice_{"alice", "k-alice"};
};

// Output as it comes, with the stage it belongs to.
struct Collected {
  std::mutex mu;
  std::condition_variable cv;
  std::string out;
  std::vector<std::string> stages;
  std::size_t queued = 0;

  RunOptions options(CancelToken* cancel = nullptr) {
    RunOptions o;
    o.cancel = cancel;
    o.callbacks.on_output = [this](std::string_view stream, std::string_view text) {
      std::lock_guard l(mu);
      if (stream == "stdout") out += text;
      cv.notify_all();
    };
    o.callbacks.on_stage = [this](std::string_view s) {
      std::lock_guard l(mu);
      stages.emplace_back(s);
    };
    o.callbacks.on_queued = [this](std::size_t, std::size_t) {
      std::lock_guard l(mu);
      ++queued;
      cv.notify_all();
    };
    return o;
  }
  template <class Pred>
  bool wait(Pred p, std::chrono::seconds limit = 30s) {
    std::unique_lock l(mu);
    return cv.wait_for(l, limit, p);
  }
};

TEST_F(ServiceWithoutMcpRuns, CodeAndCommandStreamAndAreRecorded) {
  start();
  const std::string id = create("bash");
  ASSERT_FALSE(id.empty());
  Collected code;
  auto r = run_code(*env_, alice_, json{{"sandbox_id", id}, {"code", "echo one; echo two >&2"}},
                    code.options());
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "one\n");
  EXPECT_EQ(r->stderr_data, "two\n");
  EXPECT_EQ(r->reason, "exited");
  EXPECT_EQ(r->mode, "process");
  EXPECT_EQ(code.out, "one\n");
  EXPECT_EQ(code.stages, std::vector<std::string>{"run"});

  Collected cmd;
  auto c = run_command(*env_, alice_,
                       json{{"sandbox_id", id}, {"command", "echo hi > made.txt; exit 4"}},
                       cmd.options());
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->exit_code, 4);
  EXPECT_FALSE(c->failed);  // an exit code is the program's answer, not a failure
  ASSERT_TRUE(c->files_created);
  ASSERT_EQ(c->files_created->size(), 1u);
  EXPECT_EQ((*c->files_created)[0].path, "made.txt");
  EXPECT_EQ((*c->files_created)[0].uri, "sandbox://" + id + "/made.txt");

  // Both are in the history, newest first.
  auto page = sandbox_history(*env_, alice_, json{{"sandbox_id", id}});
  ASSERT_TRUE(page.ok()) << page.error().message();
  ASSERT_EQ((*page)["count"], 2);
  EXPECT_EQ((*page)["entries"][0]["tool"], "execute_command");
  EXPECT_EQ((*page)["entries"][0]["exit_code"], 4);
  EXPECT_EQ((*page)["entries"][1]["tool"], "execute_code");
  EXPECT_EQ((*page)["entries"][1]["stdout"], "one\n");

  // The schema is checked here, with the tool registry's words.
  auto bad = run_command(*env_, alice_, json{{"sandbox_id", id}, {"command", ""}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message().find("Invalid arguments for tool 'execute_command'"),
            std::string::npos)
      << bad.error().message();
  auto theirs = run_code(*env_, Caller{"bob", {}}, json{{"sandbox_id", id}, {"code", "true"}}, {});
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.error().code, ErrorCode::kNotFound);
}

// Each run's files_created starts from the listing the run before it ended
// with, when nothing else used the sandbox in between: a file the kernel's
// background thread writes between runs is reported exactly once, by
// whichever run first lists it; a file write_file made is never reported.
TEST_F(ServiceWithoutMcpRuns, ARunStartsFromTheListingTheLastRunEndedWith) {
  start();
  const std::string id = create("python");
  ASSERT_FALSE(id.empty());
  auto files_of = [](const Result<RunResult>& r) {
    std::vector<std::string> out;
    if (r.ok() && r->files_created)
      for (const auto& f : *r->files_created) out.push_back(f.path + ":" + f.status);
    return out;
  };
  auto cell = run_code(*env_, alice_,
                       json{{"sandbox_id", id},
                            {"code",
                             "import threading, time\n"
                             "def late():\n"
                             "    time.sleep(0.3)\n"
                             "    open('late.txt', 'w').write('x')\n"
                             "threading.Thread(target=late).start()\n"}},
                       {});
  ASSERT_TRUE(cell.ok()) << cell.error().message();
  // Gaps between the runs, where the write most likely lands: without the
  // kept listing a file written there was reported by no run.
  int reported = 0;
  bool seen = false;
  for (int i = 0; i < 100 && !seen; ++i) {
    if (i > 0) std::this_thread::sleep_for(20ms);
    auto c =
        run_command(*env_, alice_, json{{"sandbox_id", id}, {"command", "test -e late.txt"}}, {});
    ASSERT_TRUE(c.ok()) << c.error().message();
    for (const auto& f : files_of(c)) reported += f == "late.txt:created";
    seen = c->exit_code == 0;
  }
  ASSERT_TRUE(seen) << "late.txt never appeared";
  EXPECT_EQ(reported, 1) << "the file written between runs is reported by exactly one";

  auto w = svc_->write_file(alice_, id, "w.txt", "x");
  ASSERT_TRUE(w.ok()) << w.error().message();
  auto after = run_command(*env_, alice_, json{{"sandbox_id", id}, {"command", "true"}}, {});
  EXPECT_EQ(files_of(after), std::vector<std::string>{}) << "write_file's file is not a run's";
  auto mod = run_code(*env_, alice_,
                      json{{"sandbox_id", id}, {"code", "open('w.txt','a').write('y')"}}, {});
  EXPECT_EQ(files_of(mod), std::vector<std::string>{"w.txt:modified"});
  auto again = run_command(*env_, alice_, json{{"sandbox_id", id}, {"command", "true"}}, {});
  EXPECT_EQ(files_of(again), std::vector<std::string>{});
}

// After a run, the workdir is listed again only if the watch on the last
// listing saw a change (workspace_diff.h): a run of commands that change
// nothing, then one of each kind of change, each reported by its own run.
TEST_F(ServiceWithoutMcpRuns, EachRunReportsItsOwnChangesWithTheWatchInBetween) {
  start();
  const std::string id = create("bash");
  ASSERT_FALSE(id.empty());
  auto files_of = [&](const std::string& command) {
    auto r = run_command(*env_, alice_, json{{"sandbox_id", id}, {"command", command}}, {});
    EXPECT_TRUE(r.ok()) << r.error().message();
    std::vector<std::string> out;
    if (!r.ok()) return out;
    EXPECT_EQ(r->exit_code, 0) << command << ": " << r->stderr_data;
    if (r->files_created)
      for (const auto& f : *r->files_created) out.push_back(f.path + ":" + f.status);
    return out;
  };
  using Files = std::vector<std::string>;
  EXPECT_EQ(files_of("mkdir -p a/b"), Files{});
  EXPECT_EQ(files_of("true"), Files{});
  EXPECT_EQ(files_of("echo 1 > a/b/f"), Files{"a/b/f:created"});
  EXPECT_EQ(files_of("cat a/b/f"), Files{});
  EXPECT_EQ(files_of("true"), Files{});
  EXPECT_EQ(files_of("echo 2 >> a/b/f"), Files{"a/b/f:modified"});
  EXPECT_EQ(files_of("touch -d @9 a/b/f"), Files{"a/b/f:modified"});
  EXPECT_EQ(files_of("mv a/b/f a/g"), Files{"a/g:created"});
  EXPECT_EQ(files_of("true"), Files{});
  EXPECT_EQ(files_of("mkdir -p x/y/z && echo deep > x/y/z/d"), Files{"x/y/z/d:created"});
  EXPECT_EQ(files_of("echo again >> x/y/z/d"), Files{"x/y/z/d:modified"});
  EXPECT_EQ(files_of("rm -r x && true"), Files{});
  EXPECT_EQ(files_of("echo back > a/g"), Files{"a/g:modified"});
  EXPECT_EQ(files_of("true"), Files{});
}

TEST_F(ServiceWithoutMcpRuns, InterruptEndsARunningLoopAsCancelled) {
  start();
  const std::string id = create("bash");
  ASSERT_FALSE(id.empty());
  Collected seen;
  auto run = std::async(std::launch::async, [&] {
    return svc_->run_command(alice_,
                             json{{"sandbox_id", id},
                                  {"command", "echo started; while true; do sleep 0.05; done"},
                                  {"timeout_s", 60}},
                             seen.options());
  });
  ASSERT_TRUE(seen.wait([&] { return seen.out.find("started") != std::string::npos; }));
  auto intr = svc_->interrupt(alice_, id);
  ASSERT_TRUE(intr.ok()) << intr.error().message();
  EXPECT_TRUE(*intr);
  ASSERT_EQ(run.wait_for(20s), std::future_status::ready);
  auto r = run.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ((*r)["reason"], "cancelled");
  auto h = svc_->history(alice_, id);
  ASSERT_TRUE(h.ok()) << h.error().message();
  ASSERT_EQ((*h)["count"], 1);
  EXPECT_EQ((*h)["entries"][0]["reason"], "cancelled");
}

TEST_F(ServiceWithoutMcpRuns, OneShotAtTheCapWaitsForASlot) {
  ManagerOptions opts;
  opts.max_sandboxes = 1;
  start(opts);
  const std::string id = create("bash");  // the one slot
  ASSERT_FALSE(id.empty());
  Collected seen;
  auto run = std::async(std::launch::async, [&] {
    return run_code(*env_, alice_,
                    json{{"code", "echo ran"}, {"language", "bash"}, {"timeout_s", 60}},
                    seen.options());
  });
  ASSERT_TRUE(seen.wait([&] { return seen.queued > 0; }));
  EXPECT_NE(run.wait_for(0s), std::future_status::ready);
  ASSERT_TRUE(svc_->close(alice_, id).ok());
  ASSERT_EQ(run.wait_for(60s), std::future_status::ready);
  auto r = run.get();
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->stdout_data, "ran\n");
  EXPECT_FALSE(r->sandbox_id);  // one-shot
  ASSERT_TRUE(r->queued_ms);
  EXPECT_GT(*r->queued_ms, 0.0);
  EXPECT_TRUE(run_result_json(*r)["sandbox_id"].is_null());
}

}  // namespace
}  // namespace sandcastle::service
