// The tasks methods over a session (2025-11-25 era): what a task-less tool
// answers to params.task, the TTL floor, and a damaged restored task.
#include "mcp/tasks.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>

#include "mcp/session.h"
#include "server/fixtures.h"

namespace sandcastle::mcp {
namespace {

using namespace std::chrono_literals;

class TasksTest : public ::testing::Test {
 protected:
  TasksTest() {
    register_test_fixtures(server_);
    session_ = Session::create(server_, [this](const json& m) {
      json wire = json::parse(dump_message(m));
      std::lock_guard lock(mu_);
      msgs_.push_back(std::move(wire));
      cv_.notify_all();
    });
    json r = call("initialize", {{"protocolVersion", "2025-11-25"},
                                 {"capabilities", json::object()},
                                 {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
  }
  ~TasksTest() override { session_->shutdown(0ms, 2s); }

  // Sends a request and waits for its response (null after 3 s).
  json call(const std::string& method, json params) {
    const int id = next_id_++;
    session_->handle_json(
        json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});
    std::unique_lock lock(mu_);
    json found;
    cv_.wait_for(lock, 3s, [&] {
      for (const auto& m : msgs_)
        if (m.is_object() && m.value("id", json()) == id) {
          found = m;
          return true;
        }
      return false;
    });
    return found;
  }

  Server server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> msgs_;
  std::shared_ptr<Session> session_;
  int next_id_ = 0;
};

TEST_F(TasksTest, ATaskAskedOfAToolWithoutTaskSupportIsMethodNotFound) {
  json r = call("tools/call",
                {{"name", "greet"}, {"arguments", {{"name", "x"}}}, {"task", {{"ttl", 60000}}}});
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["code"], rpc_error::kMethodNotFound);
  EXPECT_EQ(r["error"]["message"],
            "tool 'greet' does not run as a task (its execution.taskSupport is forbidden): call "
            "it without params.task");
  // Without params.task it is a plain call.
  r = call("tools/call", {{"name", "greet"}, {"arguments", {{"name", "x"}}}});
  EXPECT_EQ(r["result"]["content"][0]["text"], "Hello, x!") << r.dump();
}

TEST_F(TasksTest, ATinyTtlIsRaisedToTheFloor) {
  json r =
      call("tools/call",
           {{"name", "slow_compute"}, {"arguments", {{"seconds", 0}}}, {"task", {{"ttl", 1}}}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  EXPECT_EQ(r["result"]["task"]["ttl"], server_.task_store().limits().min_ttl_ms);
  EXPECT_EQ(server_.task_store().limits().min_ttl_ms, 1000);
}

TEST_F(TasksTest, ADamagedRestoredTaskIsACleanErrorAtTasksResult) {
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  Task failed;
  failed.id = "damaged-error";
  failed.status = TaskStatus::kFailed;
  failed.created_ms = failed.updated_ms = now;
  failed.ttl_ms = 60'000;
  failed.error = nullptr;  // what a row whose error column failed to parse becomes
  server_.task_store().restore(failed);
  Task odd = failed;
  odd.id = "odd-error";
  odd.error = json{{"code", "x"}, {"message", 7}};
  server_.task_store().restore(odd);
  Task completed = failed;
  completed.id = "damaged-result";
  completed.status = TaskStatus::kCompleted;
  completed.result = json::array({1});
  server_.task_store().restore(completed);

  for (const char* id : {"damaged-error", "odd-error"}) {
    json r = call("tasks/result", {{"taskId", id}});
    ASSERT_TRUE(r.contains("error")) << r.dump();
    EXPECT_EQ(r["error"]["code"], rpc_error::kInternalError);
    EXPECT_EQ(r["error"]["message"], "task '" + std::string(id) + "' failed");
  }
  json r = call("tasks/result", {{"taskId", "damaged-result"}});
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["code"], rpc_error::kInternalError);
  EXPECT_EQ(r["error"]["message"],
            "task 'damaged-result' completed but its stored result is damaged; run it again");
}

}  // namespace
}  // namespace sandcastle::mcp
